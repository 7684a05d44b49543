// BPE merge engine shared by the byte-level (GPT-2 style) and SentencePiece-style tokenizers.
// Both reduce to: repeatedly merge the adjacent symbol pair with the lowest rank, leftmost pair
// first on ties, until no adjacent pair has a rank. Byte-level BPE ranks pairs by their line in
// the merges list; SentencePiece BPE ranks them by the score of the merged piece (higher score
// = lower rank, equal scores share a rank so the leftmost wins, as in sentencepiece/llama.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace pagellm {

// (left id, right id) -> (rank, merged id), as an open-addressing hash table keyed by the id
// pair: lookups are the inner loop of encoding and must not hash strings.
class BpeMergeTable {
 public:
  struct Entry {
    uint64_t key;
    int32_t rank;
    int32_t merged;
  };

  void Reserve(size_t n);
  // Keeps the lowest rank when a pair is added twice. Ids must be >= 0.
  void Add(int32_t left, int32_t right, int32_t rank, int32_t merged);
  const Entry* Find(int32_t left, int32_t right) const;
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t Key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  size_t Slot(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void Grow();

  std::vector<Entry> slots_;
  size_t size_ = 0;
  int shift_ = 64;
};

// Adds the merge "left right" -> left+right at `rank`, looking the three pieces up in `vocab`.
// False when one of them is not in the vocabulary.
bool AddMerge(const Vocab& vocab, std::string_view left, std::string_view right, int32_t rank,
              BpeMergeTable* table);

// One node of the merge tree: a leaf (initial symbol) or the merge of two earlier nodes.
// SentencePiece needs the tree to split "unused" pieces back into the pieces they came from.
struct BpeNode {
  int32_t id;
  int32_t left;   // node index, -1 for leaves
  int32_t right;  // node index, -1 for leaves
};

// Reusable scratch space: one merger per Encode call, used for every word of the text.
class BpeMerger {
 public:
  // Merges `ids` in place. Ids < 0 are opaque symbols that never merge. With `tree`, the tree
  // gets one leaf per input id followed by one node per merge, and `roots` (same length as
  // the output ids) the node of each output symbol.
  void Merge(const BpeMergeTable& table, std::vector<int32_t>* ids,
             std::vector<BpeNode>* tree = nullptr, std::vector<int32_t>* roots = nullptr);

 private:
  struct Candidate {
    int32_t rank;
    int32_t pos;  // index of the left symbol
    int32_t left_id;
    int32_t right_id;
    int32_t merged;
  };
  // Adds the pair starting at `pos` as a candidate if it has a rank; with `heapify` false the
  // caller restores the heap order itself.
  void Push(const BpeMergeTable& table, int32_t pos, bool heapify = true);

  std::vector<int32_t> id_;
  std::vector<int32_t> next_;
  std::vector<int32_t> prev_;
  std::vector<int32_t> node_;
  std::vector<Candidate> heap_;
};

}  // namespace pagellm
