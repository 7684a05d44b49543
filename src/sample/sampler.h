// Sampler: turns one request's logits row into the next token, following vLLM V1's sampler.
//
// Processing order (vLLM V1 vllm/v1/sample/sampler.py):
//   0. a structured-output constraint (SamplingInput::allowed_tokens, a bitmask from the
//      grammar engine, src/grammar/) sets every token it does not allow to -inf, before
//      anything else (vLLM applies the grammar bitmask to the logits before its sampler).
//   1. logprobs, when requested, come from the RAW logits: log_softmax before any of the steps
//      below (vLLM's default logprobs_mode "raw_logprobs"), so the constraint mask, bias,
//      penalties, temperature and truncation never change the reported logprobs.
//   2. logit_bias is added; while fewer than min_tokens outputs exist, EOS ids and
//      stop_token_ids are set to -inf (also under ignore_eos: vLLM masks its "all stop token
//      ids", which always include the model's EOS).
//   3. penalties: repetition (tokens in prompt or output: positive logits divided by the
//      penalty, others multiplied), then frequency (- f * count in output), then presence
//      (- p if in output).
//   4. temperature 0 => greedy argmax, lowest id on ties. (vLLM raises temperatures in
//      (0, 0.01) to 0.01 with a warning, so only exactly 0 is greedy; done here too.)
//   5. otherwise logits / temperature, then min_p (drop p < min_p * max p), then top_k (keep
//      logits >= the k-th largest, so ties at the boundary survive, as vLLM), then top_p (keep
//      the smallest highest-probability set whose mass reaches top_p, renormalized over what
//      min_p and top_k kept). vLLM V1 applies min_p BEFORE top-k/top-p (it is an
//      "argmax-invariant logits processor"); V0 applied it after. Only the order relative to
//      top_p matters, and we follow V1.
//   6. draw: inverse CDF with one 53-bit uniform over the kept tokens in ascending id order.
//      vLLM draws with an exponential race (argmax p_i / E_i); both sample exactly the same
//      distribution, the inverse CDF needs one random number instead of one per vocab entry.
//
// Ties on top_p's boundary are broken towards the lower id (torch's sort order is unspecified).
// ignore_eos does not change sampling beyond step 2: it is the StopChecker that keeps going
// after an EOS.
//
// Cost per token is about one exp() per vocabulary entry (two with logprobs); nothing sorts
// the vocabulary: top_k finds its threshold with a bounded heap, top_p histograms the mass by
// probability bucket and only orders the tokens of the bucket holding its boundary, top-n
// logprobs use a bounded heap. A Sampler holds vocabulary-sized scratch buffers reused
// between calls (no allocation per token once warm); it is not thread-safe: use one per
// thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "pagellm/sampling_params.h"
#include "sample/sampler_state.h"

namespace pagellm {

struct TokenLogprob {
  int32_t id;
  float logprob;
  bool operator==(const TokenLogprob&) const = default;
};

struct SampleResult {
  int32_t token = -1;
  // Set iff params.logprobs is set (also for logprobs == 0): raw log_softmax of the chosen
  // token. vLLM computes it only when asked, and so do we (it costs a pass over the vocab).
  std::optional<float> logprob;
  // With logprobs: 1-based rank of `token` among the raw logits, counted as vLLM does: the
  // number of ids whose logit is >= the token's (0 when logprobs were not requested).
  int32_t rank = 0;
  // The params.logprobs (whole vocabulary for -1) highest raw logprobs, descending, ties
  // broken by lower id. May or may not contain `token`.
  std::vector<TokenLogprob> top_logprobs;
};

// Everything about one request the sampler reads besides its logits.
struct SamplingInput {
  const SamplingParams& params;
  std::span<const int32_t> prompt_ids;
  // Tokens generated so far (for speculative verification: including the draft tokens before
  // the position being scored).
  std::span<const int32_t> output_ids;
  // Every id that ends generation by default (tokenizer EOS plus e.g. <|eot_id|>); masked
  // while min_tokens is not reached.
  std::span<const int32_t> eos_ids;
  // Empty, or a bitmask over the logits row (bit id % 64 of word id / 64, (vocab + 63) / 64
  // words): only ids whose bit is set may be produced (step 0).
  std::span<const uint64_t> allowed_tokens = {};
};

class Sampler {
 public:
  // Requires input.params.Validate(logits.size()) to have passed and every id in
  // prompt/output/eos to be below logits.size() (CHECKed: upstream validates them). NaN logits
  // count as -inf. If every logit is -inf the result is token 0, as torch's argmax gives.
  SampleResult Sample(std::span<const float> logits, const SamplingInput& input,
                      SamplerState& state);

  // The token Sample() picks for a greedy request, without materialising anything: when the
  // request has no logit bias, penalties or active min_tokens, the argmax is taken straight
  // from `logits` (one pass, no copy); otherwise as Sample() does. Speculative verification
  // calls it for each of its k + 1 rows. Same preconditions as Sample().
  int32_t GreedyToken(std::span<const float> logits, const SamplingInput& input);

  // The exact distribution Sample() draws from, as dense probabilities (zeros outside the
  // kept set, summing to 1): steps 2-5 above. Greedy requests get a one-hot row at the argmax.
  // For the speculative-decoding rejection sampler, which compares target and draft
  // distributions. `probs.size()` must equal `logits.size()`.
  void ComputeProbs(std::span<const float> logits, const SamplingInput& input,
                    std::span<float> probs);

  // Logprob (log-softmax of the raw logits), rank and top-N alternatives of a given token: the
  // same figures Sample() reports, for tokens that were not sampled (prompt logprobs, echo).
  SampleResult ScoreToken(std::span<const float> logits, int32_t token, int num_logprobs);

  // Temperature after vLLM's clamp of (0, 0.01) to 0.01; 0 means greedy.
  static float EffectiveTemperature(const SamplingParams& params);
  static bool IsGreedy(const SamplingParams& params) {
    return EffectiveTemperature(params) < kGreedyEpsilon;
  }

  // vLLM's _SAMPLING_EPS and _MAX_TEMP.
  static constexpr float kGreedyEpsilon = 1e-5f;
  static constexpr float kMinTemperature = 1e-2f;

 private:
  struct Candidate {
    int32_t id;
    float weight;  // unnormalized probability, exp((logit - max) / T)
  };

  // Steps 0, 2-3: copies `logits` into work_ and applies the constraint mask, bias, min_tokens
  // and penalties.
  void ProcessLogits(std::span<const float> logits, const SamplingInput& input);
  void ApplyPenalties(const SamplingInput& input);
  // Whether any repetition / frequency / presence penalty is set.
  static bool HasPenalties(const SamplingParams& p) {
    return p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f ||
           p.presence_penalty != 0.0f;
  }
  // Step 0 on work_.
  void ApplyAllowedTokens(std::span<const uint64_t> allowed);
  // Lowest id among the largest work_ values.
  int32_t Argmax() const;
  // Step 5: fills cand_ with the kept tokens in ascending id order (and block_sums_); returns
  // their total weight (0 when nothing is finite).
  double Filter(const SamplingParams& params);
  // top_p on cand_ (ascending ids in, ascending ids out).
  void ApplyTopP(float top_p, double total);
  double SumCandidates();
  // Step 6: one inverse-CDF draw from cand_.
  int32_t Draw(double total, SamplerState& state) const;
  // top_p's order: higher weight first, lower id first among equals.
  static bool Before(const Candidate& a, const Candidate& b);
  static bool BeforeNoBranch(const Candidate& a, const Candidate& b);
  // top_p's histogram bucket of a weight in (0, 1]; larger weights get larger buckets.
  static size_t WeightBucket(float weight);

  // Step 1: raw logprob, rank and top-n of result.token.
  void FillLogprobs(std::span<const float> logits, int num_logprobs, SampleResult& result);

  static constexpr size_t kBlock = 256;     // candidates per block sum
  static constexpr size_t kSortBelow = 32;  // top_p sorts ranges this small
  // bit_cast(1.0f) >> 20 is 1016: every weight in (0, 1] has a bucket below 1024.
  static constexpr size_t kNumBuckets = 1024;

  std::vector<float> work_;
  // Penalty bookkeeping, vocabulary-sized and all-zero between calls; touched_ lists the ids
  // to reset so a call costs O(prompt + output), not O(vocab).
  std::vector<int32_t> counts_;
  std::vector<uint8_t> seen_;
  std::vector<int32_t> touched_;
  std::vector<Candidate> cand_;
  std::vector<double> block_sums_;
  std::vector<Candidate> sorted_;
  std::vector<Candidate> scratch_cand_;
  std::vector<double> bucket_mass_;
  std::vector<float> scratch_;
};

// Draws an id from non-negative weights (need not sum to 1) by inverse CDF in ascending id
// order, one uniform from `state`. Returns -1 when all weights are 0. For the rejection
// sampler's bonus and recovered tokens drawn from ComputeProbs() outputs.
int32_t SampleFromProbs(std::span<const float> probs, SamplerState& state);

// One-shot convenience wrapper (allocates a Sampler per call; engines keep a Sampler).
SampleResult SampleToken(std::span<const float> logits, const SamplingParams& params,
                         std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                         SamplerState& state, std::span<const int32_t> eos_ids);

}  // namespace pagellm
