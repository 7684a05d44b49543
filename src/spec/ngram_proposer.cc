#include "spec/ngram_proposer.h"

#include <algorithm>
#include <cstddef>

#include "pagellm/check.h"

namespace pagellm {

NgramProposer::NgramProposer(int min_n, int max_n, int k, bool extend_periodic)
    : min_n_(min_n), max_n_(max_n), k_(k), extend_periodic_(extend_periodic) {
  CHECK_GE(min_n, 1);
  CHECK_LE(min_n, max_n);
  CHECK_GE(k, 1);
}

std::vector<int32_t> NgramProposer::Propose(std::span<const int32_t> tokens) const {
  return Propose(tokens, k_);
}

std::vector<int32_t> NgramProposer::Propose(std::span<const int32_t> tokens, int max_tokens) const {
  const size_t len = tokens.size();
  const size_t limit = static_cast<size_t>(std::clamp(max_tokens, 0, k_));
  if (limit == 0 || len < static_cast<size_t>(min_n_) || len < 2) return {};

  // An occurrence is identified by its end `e` (exclusive), 1 <= e <= len - 1: tokens[e - n, e)
  // equals the last n tokens. For each e, `n` is the longest common suffix of tokens[0, e) and
  // tokens[0, len), capped at max_n. Keep the longest; ascending e with a strict > keeps the
  // earliest among equals (vLLM's choice).
  const size_t max_n = static_cast<size_t>(max_n_);
  const int32_t last = tokens[len - 1];
  size_t best_n = 0;
  size_t best_end = 0;
  for (size_t e = 1; e < len; ++e) {
    if (tokens[e - 1] != last) continue;
    const size_t cap = std::min(max_n, e);
    size_t n = 1;
    while (n < cap && tokens[e - 1 - n] == tokens[len - 1 - n]) ++n;
    if (n > best_n) {
      best_n = n;
      best_end = e;
      if (best_n == max_n) break;  // nothing later can be longer, and later is not preferred
    }
  }
  if (best_n < static_cast<size_t>(min_n_)) return {};
  const size_t count = std::min(limit, len - best_end);
  std::vector<int32_t> out(tokens.begin() + best_end, tokens.begin() + best_end + count);
  if (extend_periodic_) {
    // Drafts past the sequence end repeat with period len - best_end: token best_end + i of
    // the sequence-plus-drafts, which for i >= len - best_end is draft i - (len - best_end).
    const size_t period = len - best_end;
    while (out.size() < limit) out.push_back(out[out.size() - period]);
  }
  return out;
}

}  // namespace pagellm
