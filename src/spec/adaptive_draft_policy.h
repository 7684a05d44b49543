// Adaptive drafting: how many draft tokens each running request gets in the next step.
//
// Why: a step's cost depends on how many tokens it computes. With few tokens a step is bound by
// reading the weights once (Llama-3.2-1B Q8_0 on 2 cores: 9 tokens cost ~1.27x one token),
// so drafts are nearly free; past that the step is compute-bound and every drafted token costs
// its share of the step whether it is accepted or not (batch 16: 32 tokens cost 2.0x 16). A
// fixed k therefore speeds up batch 1 and slows large batches down (measured 0.50x at batch
// 16 with k = 8). The policy drafts only where the expected accepted tokens pay for the
// expected cost:
//
//  * Acceptance: each request keeps an estimate alpha of the probability that one draft
//    position is accepted (given the previous one was), from its own verifications (decayed so
//    recent behaviour dominates) shrunk toward the engine-wide acceptance rate:
//      alpha = (acc + w * global) / (trials + w),
//    where a verification of d drafts with a accepted adds a accepted out of (a < d ? a + 1 : d)
//    examined positions. The j-th draft of a request is accepted with probability alpha^j.
//  * Cost: a step of T tokens whose undrafted size is B tokens costs (relative units)
//      cost(T) = max(1 + token_cost * (T - B), T / free_tokens):
//    up to free_tokens tokens a step is weight-bound and each extra token costs token_cost; past
//    it the step is compute-bound, linear in T.
//  * Allocation: greedily add the draft with the largest alpha_i^(j) (each request's next
//    position) while it raises expected emitted tokens per unit cost, (B + sum alpha^j) /
//    cost(T); stop at the first that does not (gains only fall and cost is convex). Each
//    request is capped by its own maximum (k, the length limits, the n-gram match).
//
// So batch 1 drafts up to k when drafts get accepted and shrinks to 1-2 when they do not; a
// batch at or above free_tokens requests drafts nothing; batches in between spend the few cheap
// slots on the requests whose drafts are being accepted. k = 0 for a request is "no drafting";
// it grows back through the engine-wide prior (the estimate of a request with no recent
// verifications tends to the global rate). The policy only chooses how many drafts are
// verified, never how they are verified, so the output distribution is exact and greedy output
// identical with any allocation. It is deterministic given the observations.
//
// "fixed" mode is vLLM's behaviour: every request gets its maximum.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace pagellm {

struct DraftPolicyConfig {
  bool adaptive = true;
  // Tokens per step below which the step is bound by reading weights (the knee of the step
  // cost). 9 fits the measured Llama-3.2-1B Q8_0 costs on 2 cores (bench verify: batch 1
  // k = 8 -> 1.27x, batch 4 with 8 / 12 / 16 tokens -> 1.08x / 1.43x / 1.76x).
  double free_tokens = 9;
  // Relative cost of one extra token inside the weight-bound region ((1.27 - 1) / 8).
  double token_cost = 0.03;
  // Pseudo-trials of the engine-wide prior in a request's estimate.
  double prior_weight = 2;
  // Per-verification decay of a request's counts (recent behaviour dominates).
  double decay = 0.7;
};

class AdaptiveDraftPolicy {
 public:
  explicit AdaptiveDraftPolicy(DraftPolicyConfig config = {}) : config_(config) {}

  // A verification of `num_drafts` drafts of which `num_accepted` were accepted.
  void Observe(const std::string& request_id, int32_t num_drafts, int32_t num_accepted);
  void Remove(const std::string& request_id) { requests_.erase(request_id); }
  // Per-position acceptance estimate of a request (the global rate for one never verified).
  double Acceptance(const std::string& request_id) const;
  double GlobalAcceptance() const;

  // Drafts per request for the next step. caps[i]: the most request i may get (0 = none);
  // alphas[i]: its acceptance estimate; base_tokens: tokens the step has without drafts (at
  // least one per running request). Fixed mode returns caps.
  std::vector<int32_t> Allocate(std::span<const double> alphas, std::span<const int32_t> caps,
                                int32_t base_tokens) const;

  const DraftPolicyConfig& config() const { return config_; }

 private:
  struct Counts {
    double accepted = 0;
    double trials = 0;
  };
  DraftPolicyConfig config_;
  std::unordered_map<std::string, Counts> requests_;
  double global_accepted_ = 0;
  double global_trials_ = 0;
};

}  // namespace pagellm
