#include "grammar/token_walker.h"

namespace pagellm {
namespace {

inline size_t HashTransition(uint64_t key) {
  key ^= key >> 29;
  key *= 0xBF58476D1CE4E5B9ULL;
  key ^= key >> 32;
  return static_cast<size_t>(key);
}

}  // namespace

void TokenWalker::Reset() {
  num_states_ = 0;
  state_ids_.clear();
  if (trans_used_ > 0) {
    std::fill(trans_keys_.begin(), trans_keys_.end(), 0);
    trans_used_ = 0;
  }
}

int32_t TokenWalker::Intern(const ParserState& s) {
  key_.assign(reinterpret_cast<const char*>(s.tops.data()), s.tops.size() * sizeof(int32_t));
  key_.push_back(s.can_end ? '1' : '0');
  auto [it, inserted] = state_ids_.emplace(key_, static_cast<int32_t>(num_states_));
  if (!inserted) return it->second;
  if (states_.size() <= num_states_) states_.resize(num_states_ + 1);
  states_[num_states_] = s;
  return static_cast<int32_t>(num_states_++);
}

int32_t TokenWalker::Step(const GrammarAutomaton& automaton, ParserWorkspace& ws, int32_t from,
                          uint8_t b) {
  const uint64_t stored = ((static_cast<uint64_t>(from) << 8) | b) + 1;
  if (!trans_keys_.empty()) {
    const size_t mask = trans_keys_.size() - 1;
    for (size_t i = HashTransition(stored) & mask; trans_keys_[i] != 0; i = (i + 1) & mask)
      if (trans_keys_[i] == stored) return trans_targets_[i];
  }
  automaton.Advance(states_[from], b, ws, &next_);
  const int32_t to = Intern(next_);
  if ((trans_used_ + 1) * 2 > trans_keys_.size()) {
    std::vector<uint64_t> old_keys;
    std::vector<int32_t> old_targets;
    old_keys.swap(trans_keys_);
    old_targets.swap(trans_targets_);
    const size_t cap = old_keys.empty() ? 4096 : old_keys.size() * 2;
    trans_keys_.assign(cap, 0);
    trans_targets_.assign(cap, 0);
    for (size_t j = 0; j < old_keys.size(); ++j) {
      if (old_keys[j] == 0) continue;
      size_t i = HashTransition(old_keys[j]) & (cap - 1);
      while (trans_keys_[i] != 0) i = (i + 1) & (cap - 1);
      trans_keys_[i] = old_keys[j];
      trans_targets_[i] = old_targets[j];
    }
  }
  const size_t mask = trans_keys_.size() - 1;
  size_t i = HashTransition(stored) & mask;
  while (trans_keys_[i] != 0) i = (i + 1) & mask;
  trans_keys_[i] = stored;
  trans_targets_[i] = to;
  ++trans_used_;
  return to;
}

size_t TokenWalker::SkipPrefix(const TokenVocabulary& vocab, std::span<const int32_t> order,
                               size_t k, std::string_view prefix) {
  auto has_prefix = [&](size_t i) {
    return vocab.sorted_bytes(static_cast<size_t>(order[i])).starts_with(prefix);
  };
  // Gallop: [lo, hi) brackets the first index without the prefix.
  size_t lo = k + 1, step = 1, hi = k + 1;
  while (hi < order.size() && has_prefix(hi)) {
    lo = hi + 1;
    hi = k + 1 + step;
    step *= 2;
  }
  hi = std::min(hi, order.size());
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (has_prefix(mid))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

}  // namespace pagellm
