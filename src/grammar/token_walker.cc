#include "grammar/token_walker.h"

namespace pagellm {

void TokenWalker::Advance(const GrammarAutomaton& automaton, ParserWorkspace& ws,
                          const ParserState& in, uint8_t b, ParserState* out) {
  memo_key_.assign(reinterpret_cast<const char*>(in.tops.data()), in.tops.size() * sizeof(int32_t));
  memo_key_.push_back(in.can_end ? '1' : '0');
  memo_key_.push_back(static_cast<char>(b));
  auto it = memo_.find(memo_key_);
  if (it != memo_.end()) {
    *out = it->second;
    return;
  }
  automaton.Advance(in, b, ws, out);
  memo_.emplace(memo_key_, *out);
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
