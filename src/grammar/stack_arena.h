// StackArena: the parser stacks of the grammar automaton as persistent linked lists whose
// nodes are hash-consed, so equal stacks are equal ids (a parser state deduplicates its stacks
// by id) and stacks share their tails (advancing a state copies nothing below the top).
// Node (pos, parent): `pos` is an element index of the flattened grammar
// (grammar/grammar_automaton.h), `parent` the node below (kBottom at the bottom).
//
// Scratch mode: nodes interned between BeginScratch() and EndScratch() are dropped at the end;
// the token-mask walks explore hundreds of thousands of token prefixes per step without
// growing the arena of the matcher's accepted history.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pagellm {

class StackArena {
 public:
  static constexpr int32_t kBottom = -1;
  struct Node {
    int32_t pos;
    int32_t parent;
  };

  int32_t Intern(int32_t pos, int32_t parent);
  const Node& node(int32_t id) const {
    return id >= kScratchBase ? scratch_[id - kScratchBase] : nodes_[id];
  }
  void BeginScratch() { scratch_mode_ = true; }
  void EndScratch();
  size_t size() const { return nodes_.size(); }

 private:
  static constexpr int32_t kScratchBase = 1 << 30;
  // Open addressing over (pos, parent) keys; slots hold node id + 1 (0 = empty).
  struct Table {
    std::vector<int32_t> slots;
    size_t used = 0;
  };
  static uint64_t Key(int32_t pos, int32_t parent) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) |
           static_cast<uint32_t>(parent);
  }
  int32_t Lookup(const Table& t, const std::vector<Node>& nodes, int32_t base, uint64_t key) const;
  void Insert(Table& t, const std::vector<Node>& nodes, int32_t base, int32_t id);

  std::vector<Node> nodes_;
  Table table_;
  std::vector<Node> scratch_;
  Table scratch_table_;
  bool scratch_mode_ = false;
};

}  // namespace pagellm
