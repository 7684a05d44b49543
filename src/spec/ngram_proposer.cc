#include "spec/ngram_proposer.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "pagellm/check.h"

namespace pagellm {

namespace {

// Occurrences that vote (the latest ones); see the header.
constexpr size_t kMaxVotes = 64;

// Length of the longest common suffix of seq[0, e) and seq[0, len), capped at `cap` (<= e);
// 0 when seq[e - 1] differs from the last token.
inline size_t SuffixMatch(std::span<const int32_t> seq, size_t e, size_t cap) {
  const size_t len = seq.size();
  if (seq[e - 1] != seq[len - 1]) return 0;
  size_t n = 1;
  while (n < cap && seq[e - 1 - n] == seq[len - 1 - n]) ++n;
  return n;
}

}  // namespace

NgramProposer::NgramProposer(int min_n, int max_n, int k, NgramRule rule)
    : min_n_(min_n), max_n_(max_n), k_(k), rule_(rule) {
  CHECK_GE(min_n, 1);
  CHECK_LE(min_n, max_n);
  CHECK_GE(k, 1);
}

std::vector<int32_t> NgramProposer::Propose(std::span<const int32_t> tokens) const {
  return Propose(tokens, k_);
}

std::vector<int32_t> NgramProposer::Propose(std::span<const int32_t> tokens, int max_tokens) const {
  const size_t limit = static_cast<size_t>(std::clamp(max_tokens, 0, k_));
  if (limit == 0 || tokens.size() < static_cast<size_t>(min_n_) || tokens.size() < 2) return {};
  return rule_ == NgramRule::kVote ? ProposeByVote(tokens, limit) : ProposeEarliest(tokens, limit);
}

std::vector<int32_t> NgramProposer::ProposeEarliest(std::span<const int32_t> tokens,
                                                    size_t limit) const {
  // An occurrence is identified by its end `e` (exclusive), 1 <= e <= len - 1: tokens[e - n, e)
  // equals the last n tokens. For each e, `n` is the longest common suffix of tokens[0, e) and
  // tokens[0, len), capped at max_n. Keep the longest; ascending e with a strict > keeps the
  // earliest among equals (vLLM's choice).
  const size_t len = tokens.size();
  const size_t max_n = static_cast<size_t>(max_n_);
  size_t best_n = 0;
  size_t best_end = 0;
  for (size_t e = 1; e < len; ++e) {
    const size_t n = SuffixMatch(tokens, e, std::min(max_n, e));
    if (n > best_n) {
      best_n = n;
      best_end = e;
      if (best_n == max_n) break;  // nothing later can be longer, and later is not preferred
    }
  }
  if (best_n < static_cast<size_t>(min_n_)) return {};
  const size_t count = std::min(limit, len - best_end);
  return std::vector<int32_t>(tokens.begin() + best_end, tokens.begin() + best_end + count);
}

std::vector<int32_t> NgramProposer::ProposeByVote(std::span<const int32_t> tokens,
                                                  size_t limit) const {
  const size_t min_n = static_cast<size_t>(min_n_);
  const size_t max_n = static_cast<size_t>(max_n_);
  std::vector<int32_t> seq(tokens.begin(), tokens.end());
  seq.reserve(tokens.size() + limit);
  std::vector<int32_t> out;
  out.reserve(limit);
  // (follower token, occurrence end) of the latest kMaxVotes occurrences of the longest
  // matched n-gram.
  std::vector<std::pair<int32_t, size_t>> followers;
  followers.reserve(kMaxVotes);
  while (out.size() < limit) {
    const std::span<const int32_t> s(seq);
    const size_t len = s.size();
    size_t best_n = 0;
    followers.clear();
    // Latest occurrence first: once kMaxVotes occurrences of a max_n match are in, nothing
    // earlier can change the vote (no match is longer than max_n), which bounds the scan on
    // long runs and cycles.
    for (size_t e = len - 1; e >= 1; --e) {
      const size_t n = SuffixMatch(s, e, std::min(max_n, e));
      if (n < min_n || n < best_n) continue;
      if (n > best_n) {
        best_n = n;
        followers.clear();
      }
      if (followers.size() < kMaxVotes) followers.emplace_back(s[e], e);
      if (best_n == max_n && followers.size() == kMaxVotes) break;
    }
    if (followers.empty()) break;
    // Most frequent follower; among equals the one whose latest occurrence is latest. After
    // sorting by (token, end) each token's run ends at its latest occurrence.
    std::sort(followers.begin(), followers.end());
    int32_t best_token = 0;
    size_t best_count = 0;
    size_t best_latest = 0;
    for (size_t i = 0; i < followers.size();) {
      size_t j = i;
      while (j < followers.size() && followers[j].first == followers[i].first) ++j;
      const size_t count = j - i;
      const size_t latest = followers[j - 1].second;
      if (count > best_count || (count == best_count && latest > best_latest)) {
        best_token = followers[i].first;
        best_count = count;
        best_latest = latest;
      }
      i = j;
    }
    out.push_back(best_token);
    seq.push_back(best_token);
  }
  return out;
}

}  // namespace pagellm
