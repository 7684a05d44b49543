#include "grammar/stack_arena.h"

#include <algorithm>

#include "pagellm/check.h"

namespace pagellm {
namespace {

inline size_t Hash(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return static_cast<size_t>(key);
}

}  // namespace

int32_t StackArena::Lookup(const Table& t, const std::vector<Node>& nodes, int32_t base,
                           uint64_t key) const {
  if (t.slots.empty()) return -1;
  const size_t mask = t.slots.size() - 1;
  for (size_t i = Hash(key) & mask;; i = (i + 1) & mask) {
    const int32_t slot = t.slots[i];
    if (slot == 0) return -1;
    const Node& n = nodes[slot - 1];
    if (Key(n.pos, n.parent) == key) return base + slot - 1;
  }
}

void StackArena::Insert(Table& t, const std::vector<Node>& nodes, int32_t base, int32_t id) {
  if ((t.used + 1) * 2 > t.slots.size()) {
    // Grow and reinsert every node (ids are positions in `nodes`).
    const size_t cap = t.slots.empty() ? 1024 : t.slots.size() * 2;
    t.slots.assign(cap, 0);
    t.used = 0;
    for (size_t k = 0; k < nodes.size(); ++k) {
      if (static_cast<int32_t>(k) == id - base) continue;
      const size_t mask = cap - 1;
      size_t i = Hash(Key(nodes[k].pos, nodes[k].parent)) & mask;
      while (t.slots[i] != 0) i = (i + 1) & mask;
      t.slots[i] = static_cast<int32_t>(k) + 1;
      ++t.used;
    }
  }
  const size_t mask = t.slots.size() - 1;
  const Node& n = nodes[id - base];
  size_t i = Hash(Key(n.pos, n.parent)) & mask;
  while (t.slots[i] != 0) i = (i + 1) & mask;
  t.slots[i] = id - base + 1;
  ++t.used;
}

int32_t StackArena::Intern(int32_t pos, int32_t parent) {
  const uint64_t key = Key(pos, parent);
  const int32_t found = Lookup(table_, nodes_, 0, key);
  if (found >= 0) return found;
  if (!scratch_mode_) {
    CHECK_LT(nodes_.size(), static_cast<size_t>(kScratchBase));
    nodes_.push_back({pos, parent});
    const int32_t id = static_cast<int32_t>(nodes_.size() - 1);
    Insert(table_, nodes_, 0, id);
    return id;
  }
  const int32_t scratch_found = Lookup(scratch_table_, scratch_, kScratchBase, key);
  if (scratch_found >= 0) return scratch_found;
  scratch_.push_back({pos, parent});
  const int32_t id = kScratchBase + static_cast<int32_t>(scratch_.size() - 1);
  Insert(scratch_table_, scratch_, kScratchBase, id);
  return id;
}

void StackArena::EndScratch() {
  scratch_mode_ = false;
  scratch_.clear();
  if (scratch_table_.used > 0) {
    std::fill(scratch_table_.slots.begin(), scratch_table_.slots.end(), 0);
    scratch_table_.used = 0;
  }
}

}  // namespace pagellm
