// Speculative-decoding verification: turns k drafted tokens plus the target model's
// distributions at the k+1 verified positions into the tokens a request appends this step.
// Follows vLLM V1's RejectionSampler (vllm/v1/sample/rejection_sampler.py), which implements
// Leviathan et al. 2023 (arXiv 2211.17192) / Chen et al. 2023 (arXiv 2302.01318): the emitted
// tokens are distributed exactly as if the target had sampled them one at a time.
//
// Greedy requests (temperature 0): walk the drafts and accept while the draft equals the target
// argmax (the id of the one-hot row ComputeProbs gives greedy requests); at the first mismatch
// emit the target argmax; if every draft matched, emit the argmax of row k (bonus). No random
// numbers are consumed, so greedy output with speculation is token-for-token identical to
// greedy output without it.
//
// Random requests: for draft i with token x, p_t = target_probs[i][x], p_d = draft_probs[i][x]
// (1 for proposers without probabilities, i.e. n-gram). One uniform u in [0, 1) is drawn and x
// is accepted iff u * p_d < p_t, i.e. with probability min(1, p_t / p_d); p_t == 0 therefore
// always rejects (disjoint supports). At the first rejection the recovered token is drawn from
// the normalized residual max(p_t - p_d, 0) (for n-gram drafts: p_t with x removed) by inverse
// CDF in ascending id order with one uniform; if the residual is all zero (only possible when
// p_t == p_d, where a rejection cannot happen unless p_d(x) == 0 too) p_t itself is used.
// If all k are accepted, the bonus token is drawn from row k with SampleFromProbs (one uniform),
// so the target's own temperature/top-k/top-p/min-p (already in its rows) apply to it.
//
// Edge case p_d(x) == 0 for a proposed token (the draft proposed something its own processed
// distribution excludes, e.g. a draft sampled before truncation, or a float underflow): the
// acceptance ratio is undefined, and we accept iff p_t(x) > 0 (ratio treated as +inf when the
// target can produce x, 0 otherwise). vLLM instead always rejects when draft_prob == 0. The
// exactness proof assumes x ~ p_d, under which this event has probability zero, so both
// choices keep the output exact for a consistent draft; ours keeps a draft the target can
// produce instead of throwing it away.
//
// NaN probabilities are treated as 0 everywhere (every comparison is written so NaN fails it);
// the result never contains an id outside [0, vocab_size).
//
// Random numbers: exactly one uniform per examined draft position plus one for the final
// (recovered or bonus) token, all from the request's own SamplerState, so per-request seeds
// reproduce and no request's draws depend on its batch neighbours.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/sampler_state.h"

namespace pagellm {

struct RejectionResult {
  // Accepted drafts followed by exactly one recovered or bonus token: size num_accepted + 1.
  std::vector<int32_t> tokens;
  int32_t num_accepted = 0;
};

// Verifies k = draft_ids.size() drafted tokens (k >= 0).
//  draft_ids:    [k] proposed tokens, each in [0, vocab_size).
//  draft_probs:  [k][vocab_size] row-major dense draft distributions (the draft's processed
//                sampling distribution, rows sum to 1), or EMPTY for proposers without
//                probabilities (n-gram): the draft token then has probability 1.
//                Ignored (may be empty or not) when `greedy`.
//  target_probs: [k+1][vocab_size] row-major dense target distributions from
//                Sampler::ComputeProbs; row i scores draft i, row k is for the bonus token.
//                One-hot rows for greedy requests.
//  greedy:       temperature-0 request: argmax verification, consumes no random numbers.
// Sizes are CHECKed (a mismatch is an engine bug).
RejectionResult RejectionSample(std::span<const int32_t> draft_ids,
                                std::span<const float> draft_probs,
                                std::span<const float> target_probs, int32_t vocab_size,
                                bool greedy, SamplerState& state);

// The greedy path on its own, for callers that already have the target's greedy token at each
// of the k + 1 verified positions (Sampler::GreedyToken) instead of one-hot rows: accept while
// draft_ids[i] == target_tokens[i], emit the target token at the first mismatch, or all k
// drafts plus target_tokens[k] (bonus). RejectionSample(greedy = true) gives the same result.
RejectionResult VerifyGreedy(std::span<const int32_t> draft_ids,
                             std::span<const int32_t> target_tokens);

// Lowest id among the largest entries of `probs` (NaN ignored); 0 when every entry is NaN. The
// greedy path's target token: for ComputeProbs' one-hot greedy rows, the hot id.
int32_t ArgmaxProb(std::span<const float> probs);

}  // namespace pagellm
