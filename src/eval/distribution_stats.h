// Per-position statistics of next-token distributions given as float32 logits, computed in
// double: log-sum-exp (so log p_i = logit_i - lse), negative log-likelihood of a target, argmax,
// and KL divergence between two distributions over the same vocabulary.
#pragma once

#include <cstdint>
#include <span>

namespace pagellm {

// log(sum_i exp(logits[i])) in double, shifted by the maximum so it never overflows.
double LogSumExp(std::span<const float> logits);

// -log softmax(logits)[target] in nats.
double NegLogLikelihood(std::span<const float> logits, int32_t target);

// Index of the largest logit (the first one on ties), as greedy sampling picks.
int32_t ArgMax(std::span<const float> logits);

// KL(P || Q) = sum_i p_i (log p_i - log q_i) in nats, for P = softmax(p_logits) and
// Q = softmax(q_logits). p_lse / q_lse are the rows' LogSumExp. Exactly 0 for identical rows.
double KlDivergence(std::span<const float> p_logits, double p_lse, std::span<const float> q_logits,
                    double q_lse);

}  // namespace pagellm
