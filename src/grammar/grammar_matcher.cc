#include "grammar/grammar_matcher.h"

#include <algorithm>

namespace pagellm {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)) {
  history_.emplace_back();
  grammar_->automaton().Start(ws_, &history_.back());
  terminated_.push_back(0);
}

bool GrammarMatcher::AdvanceBytes(const ParserState& from, std::string_view bytes) {
  next_ = from;
  for (char c : bytes) {
    if (!grammar_->automaton().Advance(next_, static_cast<uint8_t>(c), ws_, &tmp_)) return false;
    std::swap(next_, tmp_);
  }
  return true;
}

bool GrammarMatcher::AcceptToken(int32_t token) {
  if (IsTerminated()) return false;
  const TokenVocabulary& v = grammar_->vocab();
  const std::vector<int32_t>& eos = v.eos_ids();
  if (std::find(eos.begin(), eos.end(), token) != eos.end()) {
    if (!CanEnd()) return false;
    history_.push_back(ParserState{});
    terminated_.push_back(1);
    return true;
  }
  if (!v.usable(token)) return false;
  if (!AdvanceBytes(state(), v.bytes(token))) return false;
  history_.push_back(next_);
  terminated_.push_back(0);
  return true;
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (IsTerminated()) return false;
  if (!AdvanceBytes(state(), bytes)) return false;
  history_.push_back(next_);
  terminated_.push_back(0);
  return true;
}

void GrammarMatcher::Rollback(int n) {
  CHECK(n >= 0 && n <= num_accepted()) << "rollback of " << n << " of " << num_accepted();
  history_.resize(history_.size() - n);
  terminated_.resize(terminated_.size() - n);
}

void GrammarMatcher::BuildStateKey(const ParserState& s) {
  chains_.resize(s.tops.size());
  for (size_t i = 0; i < s.tops.size(); ++i) {
    std::string& chain = chains_[i];
    chain.clear();
    for (int32_t n = s.tops[i]; n != StackArena::kBottom;) {
      const StackArena::Node& node = ws_.arena.node(n);
      chain.append(reinterpret_cast<const char*>(&node.pos), sizeof(node.pos));
      n = node.parent;
    }
  }
  std::sort(chains_.begin(), chains_.end());
  key_.assign(1, s.can_end ? '1' : '0');
  for (const std::string& chain : chains_) {
    const uint32_t len = static_cast<uint32_t>(chain.size());
    key_.append(reinterpret_cast<const char*>(&len), sizeof(len));
    key_ += chain;
  }
}

void GrammarMatcher::FillMask(std::span<uint64_t> mask) {
  const TokenVocabulary& v = grammar_->vocab();
  CHECK_EQ(mask.size(), static_cast<size_t>(v.mask_words()));
  if (IsTerminated()) {
    std::fill(mask.begin(), mask.end(), 0);
    return;
  }
  const ParserState& s = state();
  BuildStateKey(s);
  if (grammar_->LookupMask(key_, mask)) return;
  ComputeMask(s, mask);
  grammar_->StoreMask(key_, mask);
}

void GrammarMatcher::ComputeMask(const ParserState& s, std::span<uint64_t> mask) {
  const TokenVocabulary& v = grammar_->vocab();
  std::fill(mask.begin(), mask.end(), 0);
  positions_.clear();
  for (int32_t top : s.tops) positions_.push_back(ws_.arena.node(top).pos);
  std::sort(positions_.begin(), positions_.end());
  positions_.erase(std::unique(positions_.begin(), positions_.end()), positions_.end());
  uncertain_.clear();
  for (int32_t pos : positions_) {
    const CompiledGrammar::PositionTokens& pt = grammar_->position_tokens(pos);
    if (!pt.accepted_bits.empty()) {
      for (size_t w = 0; w < mask.size(); ++w) mask[w] |= pt.accepted_bits[w];
    } else {
      for (int32_t id : pt.accepted_ids) mask[id >> 6] |= uint64_t{1} << (id & 63);
    }
    uncertain_.insert(uncertain_.end(), pt.uncertain.begin(), pt.uncertain.end());
  }
  if (positions_.size() > 1) {
    std::sort(uncertain_.begin(), uncertain_.end());
    uncertain_.erase(std::unique(uncertain_.begin(), uncertain_.end()), uncertain_.end());
  }
  // Drop what another position already accepted.
  const std::vector<int32_t>& sorted = v.sorted_ids();
  uncertain_.erase(std::remove_if(uncertain_.begin(), uncertain_.end(),
                                  [&](int32_t k) {
                                    const int32_t id = sorted[k];
                                    return (mask[id >> 6] >> (id & 63)) & 1;
                                  }),
                   uncertain_.end());
  if (!uncertain_.empty()) {
    ws_.arena.BeginScratch();
    walker_.Reset();
    walker_.Walk(grammar_->automaton(), v, ws_, s, uncertain_, /*follow=*/nullptr,
                 [&](int32_t k, TokenVerdict verdict) {
                   if (verdict == TokenVerdict::kAccept) {
                     const int32_t id = sorted[k];
                     mask[id >> 6] |= uint64_t{1} << (id & 63);
                   }
                 });
    ws_.arena.EndScratch();
  }
  if (s.can_end) {
    for (int32_t id : v.eos_ids())
      if (id >= 0 && id < v.mask_size()) mask[id >> 6] |= uint64_t{1} << (id & 63);
  }
}

}  // namespace pagellm
