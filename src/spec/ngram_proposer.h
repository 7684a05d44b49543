// Prompt-lookup (n-gram) drafting, as vLLM V1's NgramProposer
// (vllm/v1/spec_decode/ngram_proposer.py): the draft is what followed an earlier occurrence of
// the sequence's last n tokens, for n in [min_n, max_n].
//
// Which occurrence (checked against vLLM, which finds it with a KMP pass over the reversed
// tokens): the LONGEST match wins, n capped at max_n; among occurrences of that longest n-gram
// the EARLIEST one in the sequence wins (vLLM: "we want to get the target n-gram of the earliest
// position in the original tokens"), not the most recent. Occurrences may overlap the final
// n-gram itself (only the final n-gram's own position is excluded), so a sequence ending in a
// run "a a a a" proposes more "a"s. The proposal is the up-to-k tokens that followed the chosen
// occurrence, fewer when the sequence ends first (never empty when a match exists: the
// occurrence ends before the last token). No match, or fewer than min_n tokens: empty.
//
// Periodic extension (pagellm, off in vLLM mode): when the copied continuation reaches the end
// of the sequence before k tokens, copying goes on from the drafts themselves, i.e. the match
// is read as a period (end - occurrence end) that keeps repeating: after "x a b a b" with the
// 2-gram "a b" matched at [1, 3), vLLM proposes "a b" and stops; the extension proposes
// "a b a b ..." up to k. On text that repeats (a run of one token, a cycle) this drafts k
// tokens at once instead of growing one period per step. The drafts only decide what gets
// verified, never what is emitted, so the output is unchanged either way.
//
// Cost: for each candidate end position, one backward comparison of at most max_n tokens,
// O(len * max_n) worst case (a run of one repeated token), O(len) typical since most positions
// fail on their first token. No allocation besides the result.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagellm {

class NgramProposer {
 public:
  // vLLM's prompt_lookup_min / prompt_lookup_max / num_speculative_tokens:
  // 1 <= min_n <= max_n, k >= 1 (CHECKed).
  NgramProposer(int min_n, int max_n, int k) : NgramProposer(min_n, max_n, k, false) {}
  // extend_periodic: continue a proposal that reaches the end of the sequence (see above).
  NgramProposer(int min_n, int max_n, int k, bool extend_periodic);

  // 0..k draft tokens continuing `tokens` (prompt + output so far); empty when no match.
  std::vector<int32_t> Propose(std::span<const int32_t> tokens) const;

  // As above but at most `max_tokens` drafts (e.g. max_model_len - tokens.size(), as vLLM caps
  // drafts at the model length, or the request's remaining max_tokens); <= 0 gives none.
  std::vector<int32_t> Propose(std::span<const int32_t> tokens, int max_tokens) const;

  int min_n() const { return min_n_; }
  int max_n() const { return max_n_; }
  int k() const { return k_; }
  bool extend_periodic() const { return extend_periodic_; }

 private:
  int min_n_;
  int max_n_;
  int k_;
  bool extend_periodic_;
};

}  // namespace pagellm
