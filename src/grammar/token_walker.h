// TokenWalker: runs a parser state over many tokens at once, visiting them in byte order so
// that each token only advances the parser over the bytes it does not share with the previous
// one (the parser states of every prefix depth are kept), and skipping every token under a
// prefix the grammar rejects with one search. This is the token-trie traversal of xgrammar
// (Dong et al. 2024) done on the sorted token list instead of an explicit trie.
//
// The parser states met are interned and their byte transitions cached (a lazily built DFA
// over parser states, as RE2 runs its NFA): inside a JSON string every character leads back to
// the same state, so most steps of a walk are one table lookup instead of a closure.
//
// Verdicts: kAccept (some path consumes every byte), kReject, and -- only with a `follow` set,
// for the mask cache, where the state is one stack over a rule's position and can_end means
// "that rule finished" -- kUncertain: the rule finished before the token did and the next byte
// of the token is one that may follow the rule somewhere in the grammar, so whether the rest
// fits depends on the stack below (xgrammar's context-dependent tokens; the follow-set check is
// its "context expansion"). A token whose byte after every finish of the rule is outside the
// follow set is rejected in any context.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_automaton.h"
#include "grammar/token_vocabulary.h"

namespace pagellm {

enum class TokenVerdict : uint8_t { kReject, kAccept, kUncertain };

class TokenWalker {
 public:
  // Forgets the interned states and transitions. Required whenever the stack nodes they refer
  // to are dropped (ws.arena.EndScratch()); walks in between share what they learned.
  void Reset();

  // Visits sorted index order[k] (indices into vocab.sorted_ids(), ascending) for every k and
  // calls on_verdict(sorted_index, verdict) for those accepted or uncertain (the rest, often
  // most of the vocabulary, are skipped by prefix without a call). Parser nodes are interned in
  // ws.arena (callers put it in scratch mode). follow: null, or the bytes that may follow the
  // bottom rule (see the file comment).
  template <typename F>
  void Walk(const GrammarAutomaton& automaton, const TokenVocabulary& vocab, ParserWorkspace& ws,
            const ParserState& start, std::span<const int32_t> order, const ByteSet* follow,
            F&& on_verdict);

 private:
  // First k' > k such that the bytes of order[k'] do not start with `prefix` (order is sorted,
  // so those that do are contiguous): galloping then binary search.
  static size_t SkipPrefix(const TokenVocabulary& vocab, std::span<const int32_t> order, size_t k,
                           std::string_view prefix);

  // The id of the state equal to `s`, interning a copy when new.
  int32_t Intern(const ParserState& s);
  // The state after byte b from state `from`: a cached transition or automaton.Advance.
  int32_t Step(const GrammarAutomaton& automaton, ParserWorkspace& ws, int32_t from, uint8_t b);

  bool tops_empty(int32_t id) const { return states_[id].tops.empty(); }
  bool can_end(int32_t id) const { return states_[id].can_end; }

  std::vector<ParserState> states_;  // [num_states_] (capacity reused across Reset())
  size_t num_states_ = 0;
  std::unordered_map<std::string, int32_t> state_ids_;
  std::string key_;
  // Open-addressed transitions: key (state << 8 | byte) + 1 -> target state.
  std::vector<uint64_t> trans_keys_;
  std::vector<int32_t> trans_targets_;
  size_t trans_used_ = 0;
  ParserState next_;

  std::vector<int32_t> levels_;  // [depth] state after `depth` bytes of the current token
  // [depth] some j < depth has the bottom rule finished after j bytes with tok[j] in `follow`.
  std::vector<uint8_t> bottom_;
};

template <typename F>
void TokenWalker::Walk(const GrammarAutomaton& automaton, const TokenVocabulary& vocab,
                       ParserWorkspace& ws, const ParserState& start,
                       std::span<const int32_t> order, const ByteSet* follow, F&& on_verdict) {
  if (levels_.empty()) {
    levels_.resize(1);
    bottom_.resize(1);
  }
  levels_[0] = Intern(start);
  bottom_[0] = 0;
  // A finish of the bottom rule after j bytes, followed by byte b, keeps the token open.
  auto opens = [&](int32_t state, uint8_t b) {
    return follow != nullptr && can_end(state) && follow->Contains(b);
  };
  size_t num_levels = 1;  // levels_[0, num_levels) hold the prefixes of `prev`
  std::string_view prev;
  size_t k = 0;
  while (k < order.size()) {
    const std::string_view tok = vocab.sorted_bytes(static_cast<size_t>(order[k]));
    size_t d = 0;
    const size_t max_common = std::min({prev.size(), tok.size(), num_levels - 1});
    while (d < max_common && prev[d] == tok[d]) ++d;
    while (d < tok.size() && !tops_empty(levels_[d])) {
      if (levels_.size() < d + 2) {
        levels_.resize(d + 2);
        bottom_.resize(d + 2);
      }
      const uint8_t b = static_cast<uint8_t>(tok[d]);
      bottom_[d + 1] = bottom_[d] | (opens(levels_[d], b) ? 1 : 0);
      levels_[d + 1] = Step(automaton, ws, levels_[d], b);
      ++d;
    }
    num_levels = d + 1;
    prev = tok;
    const int32_t last = levels_[d];
    if (d == tok.size()) {
      if (!tops_empty(last) || can_end(last))
        on_verdict(order[k], TokenVerdict::kAccept);
      else if (bottom_[d])
        on_verdict(order[k], TokenVerdict::kUncertain);
      ++k;
      continue;
    }
    // No stack survives tok[0, d): every token under that prefix (all longer than d) shares the
    // verdict, but for a finish of the bottom rule right at d, which depends on its next byte.
    const size_t end = SkipPrefix(vocab, order, k, tok.substr(0, d));
    if (bottom_[d]) {
      for (; k < end; ++k) on_verdict(order[k], TokenVerdict::kUncertain);
    } else if (follow != nullptr && can_end(last)) {
      for (; k < end; ++k) {
        const std::string_view t = vocab.sorted_bytes(static_cast<size_t>(order[k]));
        if (follow->Contains(static_cast<uint8_t>(t[d])))
          on_verdict(order[k], TokenVerdict::kUncertain);
      }
    } else {
      k = end;
    }
  }
}

}  // namespace pagellm
