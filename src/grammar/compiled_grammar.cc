#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <bit>
#include <numeric>

#include "grammar/follow_sets.h"
#include "grammar/rule_inliner.h"
#include "grammar/token_walker.h"

namespace pagellm {

CompiledGrammar::CompiledGrammar(const Grammar& grammar,
                                 std::shared_ptr<const TokenVocabulary> vocab)
    : automaton_(InlineLeafRules(grammar)), vocab_(std::move(vocab)) {
  const TokenVocabulary& v = *vocab_;
  std::vector<int32_t> all(v.sorted_ids().size());
  std::iota(all.begin(), all.end(), 0);
  positions_.resize(automaton_.num_elements());
  const std::vector<ByteSet> follow = ComputeFollowSets(automaton_);
  ParserWorkspace ws;
  // One walker for every position: the parser states of a rule's body recur from position to
  // position (every character position of a string rule leads to the same states).
  TokenWalker walker;
  walker.Reset();
  ws.arena.BeginScratch();
  ParserState start;
  std::vector<int32_t> accepted;
  for (int32_t pos = 0; pos < automaton_.num_elements(); ++pos) {
    if (automaton_.element(pos).kind != GrammarAutomaton::Kind::kBytes) continue;
    PositionTokens& pt = positions_[pos];
    accepted.clear();
    automaton_.StartAt(pos, ws, &start);
    walker.Walk(automaton_, v, ws, start, all, &follow[automaton_.rule_of(pos)],
                [&](int32_t sorted_index, TokenVerdict verdict) {
                  if (verdict == TokenVerdict::kAccept)
                    accepted.push_back(v.sorted_ids()[sorted_index]);
                  else if (verdict == TokenVerdict::kUncertain)
                    pt.uncertain.push_back(sorted_index);
                });
    if (accepted.size() * 32 >= static_cast<size_t>(v.mask_size())) {
      pt.accepted_bits.assign(v.mask_words(), 0);
      for (int32_t id : accepted) pt.accepted_bits[id >> 6] |= uint64_t{1} << (id & 63);
    } else {
      pt.accepted_ids = accepted;
    }
    pt.uncertain.shrink_to_fit();
    memory_bytes_ +=
        pt.accepted_bits.size() * 8 + pt.accepted_ids.size() * 4 + pt.uncertain.size() * 4;
  }
  ws.arena.EndScratch();
}

bool CompiledGrammar::LookupMask(const std::string& key, std::span<uint64_t> mask) const {
  std::lock_guard<std::mutex> lock(state_mu_);
  auto it = state_masks_.find(key);
  if (it == state_masks_.end()) return false;
  const CachedMask& m = it->second;
  if (!m.words.empty()) {
    std::copy(m.words.begin(), m.words.end(), mask.begin());
  } else {
    std::fill(mask.begin(), mask.end(), 0);
    for (int32_t id : m.ids) mask[id >> 6] |= uint64_t{1} << (id & 63);
  }
  return true;
}

void CompiledGrammar::StoreMask(const std::string& key, std::span<const uint64_t> mask) const {
  size_t count = 0;
  for (uint64_t w : mask) count += static_cast<size_t>(std::popcount(w));
  CachedMask m;
  if (count * 32 < mask.size() * 64) {
    m.ids.reserve(count);
    for (size_t w = 0; w < mask.size(); ++w)
      for (uint64_t bits = mask[w]; bits != 0; bits &= bits - 1)
        m.ids.push_back(static_cast<int32_t>(w * 64 + std::countr_zero(bits)));
  } else {
    m.words.assign(mask.begin(), mask.end());
  }
  const size_t bytes = key.size() + m.ids.size() * 4 + m.words.size() * 8 + 64;
  std::lock_guard<std::mutex> lock(state_mu_);
  if (state_bytes_ + bytes > kMaxStateCacheBytes) {
    state_masks_.clear();
    state_bytes_ = 0;
  }
  if (state_masks_.emplace(key, std::move(m)).second) state_bytes_ += bytes;
}

}  // namespace pagellm
