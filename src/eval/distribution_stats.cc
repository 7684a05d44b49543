#include "eval/distribution_stats.h"

#include <cmath>

#include "pagellm/check.h"

namespace pagellm {

double LogSumExp(std::span<const float> logits) {
  CHECK(!logits.empty());
  double max = logits[0];
  for (float v : logits) max = std::max(max, static_cast<double>(v));
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - max);
  return max + std::log(sum);
}

double NegLogLikelihood(std::span<const float> logits, int32_t target) {
  CHECK(target >= 0 && target < static_cast<int32_t>(logits.size()));
  return LogSumExp(logits) - static_cast<double>(logits[target]);
}

int32_t ArgMax(std::span<const float> logits) {
  CHECK(!logits.empty());
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(logits.size()); ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

double KlDivergence(std::span<const float> p_logits, double p_lse, std::span<const float> q_logits,
                    double q_lse) {
  CHECK_EQ(p_logits.size(), q_logits.size());
  double kl = 0;
  for (size_t i = 0; i < p_logits.size(); ++i) {
    const double log_p = static_cast<double>(p_logits[i]) - p_lse;
    const double log_q = static_cast<double>(q_logits[i]) - q_lse;
    kl += std::exp(log_p) * (log_p - log_q);
  }
  return kl;
}

}  // namespace pagellm
