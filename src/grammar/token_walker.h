// TokenWalker: runs a parser state over many tokens at once, visiting them in byte order so
// that each token only advances the parser over the bytes it does not share with the previous
// one (the parser states of every prefix depth are kept), and skipping every token under a
// prefix the grammar rejects with one search. This is the token-trie traversal of xgrammar
// (Dong et al. 2024) done on the sorted token list instead of an explicit trie.
//
// Verdicts: kAccept (some path consumes every byte), kReject, and -- only with `open_bottom`,
// for the mask cache, where the state is one stack over a rule's position and can_end means
// "that rule finished" -- kUncertain: the rule finished before the token did, so whether the
// rest fits depends on what follows the rule (xgrammar's context-dependent tokens).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar_automaton.h"
#include "grammar/token_vocabulary.h"

namespace pagellm {

enum class TokenVerdict : uint8_t { kReject, kAccept, kUncertain };

class TokenWalker {
 public:
  // Visits sorted index order[k] (indices into vocab.sorted_ids(), ascending) for every k and
  // calls on_verdict(sorted_index, verdict). Parser nodes are interned in ws.arena (callers
  // put it in scratch mode).
  template <typename F>
  void Walk(const GrammarAutomaton& automaton, const TokenVocabulary& vocab, ParserWorkspace& ws,
            const ParserState& start, std::span<const int32_t> order, bool open_bottom,
            F&& on_verdict);

 private:
  // First k' > k such that the bytes of order[k'] do not start with `prefix` (order is sorted,
  // so those that do are contiguous): galloping then binary search.
  static size_t SkipPrefix(const TokenVocabulary& vocab, std::span<const int32_t> order, size_t k,
                           std::string_view prefix);

  // automaton.Advance, memoized for the walk: token prefixes keep reaching the same parser
  // state (inside a JSON string every character leads back to it), and a lookup is far cheaper
  // than a closure.
  void Advance(const GrammarAutomaton& automaton, ParserWorkspace& ws, const ParserState& in,
               uint8_t b, ParserState* out);

  std::vector<ParserState> levels_;  // [depth] state after `depth` bytes of the current token
  std::vector<uint8_t> bottom_;      // [depth] can_end at some depth <= this one
  std::unordered_map<std::string, ParserState> memo_;
  std::string memo_key_;
};

template <typename F>
void TokenWalker::Walk(const GrammarAutomaton& automaton, const TokenVocabulary& vocab,
                       ParserWorkspace& ws, const ParserState& start,
                       std::span<const int32_t> order, bool open_bottom, F&& on_verdict) {
  memo_.clear();
  if (levels_.empty()) levels_.resize(1);
  levels_[0] = start;
  if (bottom_.empty()) bottom_.resize(1);
  bottom_[0] = start.can_end ? 1 : 0;
  size_t num_levels = 1;  // levels_[0, num_levels) hold the prefixes of `prev`
  std::string_view prev;
  size_t k = 0;
  while (k < order.size()) {
    const std::string_view tok = vocab.sorted_bytes(static_cast<size_t>(order[k]));
    size_t d = 0;
    const size_t max_common = std::min({prev.size(), tok.size(), num_levels - 1});
    while (d < max_common && prev[d] == tok[d]) ++d;
    while (d < tok.size() && !levels_[d].tops.empty()) {
      if (levels_.size() < d + 2) {
        levels_.resize(d + 2);
        bottom_.resize(d + 2);
      }
      Advance(automaton, ws, levels_[d], static_cast<uint8_t>(tok[d]), &levels_[d + 1]);
      bottom_[d + 1] = bottom_[d] | (levels_[d + 1].can_end ? 1 : 0);
      ++d;
    }
    num_levels = d + 1;
    prev = tok;
    if (d == tok.size()) {
      TokenVerdict v = TokenVerdict::kAccept;
      if (levels_[d].dead()) {
        v = open_bottom && d >= 1 && bottom_[d - 1] ? TokenVerdict::kUncertain
                                                    : TokenVerdict::kReject;
      }
      on_verdict(order[k], v);
      ++k;
      continue;
    }
    // No stack survives tok[0, d): every token under that prefix that is longer than d shares
    // the verdict.
    const TokenVerdict v =
        open_bottom && bottom_[d] ? TokenVerdict::kUncertain : TokenVerdict::kReject;
    const size_t end = SkipPrefix(vocab, order, k, tok.substr(0, d));
    for (; k < end; ++k) on_verdict(order[k], v);
  }
}

}  // namespace pagellm
