#include "tokenizer/bpe_merger.h"

#include <algorithm>
#include <string>

namespace pagellm {

void BpeMergeTable::Reserve(size_t n) {
  size_t capacity = 16;
  while (capacity < 2 * n) capacity *= 2;
  if (capacity <= slots_.size()) return;
  std::vector<Entry> old = std::move(slots_);
  slots_.assign(capacity, Entry{kEmpty, 0, 0});
  shift_ = 64 - __builtin_ctzll(capacity);
  size_ = 0;
  for (const Entry& e : old) {
    if (e.key == kEmpty) continue;
    Add(static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key & 0xFFFFFFFFu), e.rank,
        e.merged);
  }
}

void BpeMergeTable::Grow() {
  Reserve(slots_.empty() ? 8 : slots_.size());
}

void BpeMergeTable::Add(int32_t left, int32_t right, int32_t rank, int32_t merged) {
  if (2 * (size_ + 1) > slots_.size()) Grow();
  const uint64_t key = Key(left, right);
  const size_t mask = slots_.size() - 1;
  for (size_t i = Slot(key);; i = (i + 1) & mask) {
    Entry& e = slots_[i];
    if (e.key == kEmpty) {
      e = Entry{key, rank, merged};
      ++size_;
      return;
    }
    if (e.key == key) {
      if (rank < e.rank) e = Entry{key, rank, merged};
      return;
    }
  }
}

const BpeMergeTable::Entry* BpeMergeTable::Find(int32_t left, int32_t right) const {
  if (slots_.empty() || left < 0 || right < 0) return nullptr;
  const uint64_t key = Key(left, right);
  const size_t mask = slots_.size() - 1;
  for (size_t i = Slot(key);; i = (i + 1) & mask) {
    const Entry& e = slots_[i];
    if (e.key == key) return &e;
    if (e.key == kEmpty) return nullptr;
  }
}

bool AddMerge(const Vocab& vocab, std::string_view left, std::string_view right, int32_t rank,
              BpeMergeTable* table) {
  const auto l = vocab.Find(left);
  const auto r = vocab.Find(right);
  thread_local std::string joined;  // reused: loading calls this for every merge
  joined.assign(left).append(right);
  const auto merged = vocab.Find(joined);
  if (!l || !r || !merged) return false;
  table->Add(*l, *r, rank, *merged);
  return true;
}

namespace {

// Min-heap order: lowest rank first, then leftmost position.
struct CandidateAfter {
  template <typename C>
  bool operator()(const C& a, const C& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

}  // namespace

void BpeMerger::Push(const BpeMergeTable& table, int32_t pos, bool heapify) {
  const int32_t right = next_[pos];
  if (right < 0) return;
  const BpeMergeTable::Entry* e = table.Find(id_[pos], id_[right]);
  if (e == nullptr) return;
  heap_.push_back(Candidate{e->rank, pos, id_[pos], id_[right], e->merged});
  if (heapify) std::push_heap(heap_.begin(), heap_.end(), CandidateAfter());
}

void BpeMerger::Merge(const BpeMergeTable& table, std::vector<int32_t>* ids,
                      std::vector<BpeNode>* tree, std::vector<int32_t>* roots) {
  const int32_t n = static_cast<int32_t>(ids->size());
  if (tree != nullptr) {
    tree->clear();
    for (int32_t id : *ids) tree->push_back(BpeNode{id, -1, -1});
  }
  if (n < 2) {
    if (roots != nullptr) {
      roots->clear();
      for (int32_t i = 0; i < n; ++i) roots->push_back(i);
    }
    return;
  }
  id_.assign(ids->begin(), ids->end());
  next_.resize(n);
  prev_.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    next_[i] = i + 1 < n ? i + 1 : -1;
    prev_[i] = i - 1;
  }
  if (tree != nullptr) {
    node_.resize(n);
    for (int32_t i = 0; i < n; ++i) node_[i] = i;
  }
  heap_.clear();
  for (int32_t i = 0; i + 1 < n; ++i) Push(table, i, /*heapify=*/false);
  std::make_heap(heap_.begin(), heap_.end(), CandidateAfter());

  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), CandidateAfter());
    const Candidate c = heap_.back();
    heap_.pop_back();
    // Entries go stale when a neighbour merges first; ids only grow by merging, so matching
    // ids at `pos` and its current successor mean the pair is still there.
    if (id_[c.pos] != c.left_id) continue;
    const int32_t right = next_[c.pos];
    if (right < 0 || id_[right] != c.right_id) continue;
    id_[c.pos] = c.merged;
    id_[right] = -2;  // dead; never equal to a real id
    next_[c.pos] = next_[right];
    if (next_[right] >= 0) prev_[next_[right]] = c.pos;
    if (tree != nullptr) {
      tree->push_back(BpeNode{c.merged, node_[c.pos], node_[right]});
      node_[c.pos] = static_cast<int32_t>(tree->size()) - 1;
    }
    if (prev_[c.pos] >= 0) Push(table, prev_[c.pos]);
    Push(table, c.pos);
  }

  ids->clear();
  if (roots != nullptr) roots->clear();
  for (int32_t i = 0; i >= 0; i = next_[i]) {
    ids->push_back(id_[i]);
    if (roots != nullptr) roots->push_back(tree != nullptr ? node_[i] : i);
  }
}

}  // namespace pagellm
