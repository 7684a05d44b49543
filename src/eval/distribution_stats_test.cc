// Softmax statistics in double against closed forms.
#include "eval/distribution_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace pagellm {
namespace {

TEST(DistributionStats, LogSumExpAndNll) {
  const std::vector<float> uniform(512, 3.25f);
  EXPECT_NEAR(LogSumExp(uniform), 3.25 + std::log(512.0), 1e-12);
  EXPECT_NEAR(NegLogLikelihood(uniform, 17), std::log(512.0), 1e-12);
  // No overflow for large logits: log(e^1000 + e^999) = 1000 + log(1 + e^-1).
  const std::vector<float> big = {1000.0f, 999.0f};
  EXPECT_NEAR(LogSumExp(big), 1000.0 + std::log1p(std::exp(-1.0)), 1e-9);
  EXPECT_NEAR(NegLogLikelihood(big, 1), 1.0 + std::log1p(std::exp(-1.0)), 1e-9);
}

TEST(DistributionStats, ArgMaxTakesFirstOfTies) {
  EXPECT_EQ(ArgMax(std::vector<float>{1, 5, 2, 5}), 1);
  EXPECT_EQ(ArgMax(std::vector<float>{-3}), 0);
}

TEST(DistributionStats, KlDivergence) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0, 3);
  std::vector<float> p(300), q(300);
  for (auto& v : p) v = n(rng);
  for (auto& v : q) v = n(rng);
  const double p_lse = LogSumExp(p), q_lse = LogSumExp(q);
  EXPECT_EQ(KlDivergence(p, p_lse, p, p_lse), 0.0);  // exactly, not approximately
  // Shifting all logits does not change the distribution.
  std::vector<float> shifted = p;
  for (auto& v : shifted) v += 4.0f;
  EXPECT_NEAR(KlDivergence(p, p_lse, shifted, LogSumExp(shifted)), 0.0, 1e-12);
  const double kl = KlDivergence(p, p_lse, q, q_lse);
  EXPECT_GT(kl, 0.0);
  // Closed form over two outcomes: KL = a log(a/b) + (1-a) log((1-a)/(1-b)).
  const std::vector<float> two_p = {0.0f, 1.0f}, two_q = {0.5f, -0.5f};
  const double a = 1 / (1 + std::exp(1.0)), b = 1 / (1 + std::exp(-1.0));
  EXPECT_NEAR(KlDivergence(two_p, LogSumExp(two_p), two_q, LogSumExp(two_q)),
              a * std::log(a / b) + (1 - a) * std::log((1 - a) / (1 - b)), 1e-12);
}

}  // namespace
}  // namespace pagellm
