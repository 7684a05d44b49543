#include "kernels/moe_routing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace pagellm {
namespace {

// The definition in double: softmax over all, the k largest (lower id first on ties), the
// selected probabilities optionally divided by their sum.
void RouteDefinition(const std::vector<float>& x, int k, bool normalize, std::vector<int>* ids,
                     std::vector<double>* w) {
  const int n = static_cast<int>(x.size());
  double max = -INFINITY, sum = 0;
  for (float v : x) max = std::max(max, double{v});
  std::vector<double> p(n);
  for (int e = 0; e < n; ++e) sum += p[e] = std::exp(double{x[e]} - max);
  for (double& v : p) v /= sum;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  ids->assign(order.begin(), order.begin() + k);
  w->clear();
  double sel = 0;
  for (int e : *ids) sel += p[e];
  for (int e : *ids) w->push_back(normalize ? p[e] / sel : p[e]);
}

TEST(MoeRoutingTest, MatchesTheDefinitionOnRandomLogits) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int n_experts : {1, 2, 8, 60, 128}) {
    for (int k : {1, 2, 4, 8}) {
      if (k > n_experts) continue;
      for (bool normalize : {false, true}) {
        const int rows = 7;
        std::vector<float> logits(rows * n_experts);
        for (float& v : logits) v = normal(rng);
        std::vector<int32_t> ids(rows * k);
        std::vector<float> w(rows * k);
        RouteTopK(logits.data(), rows, n_experts, k, normalize, ids.data(), w.data());
        for (int r = 0; r < rows; ++r) {
          std::vector<int> want_ids;
          std::vector<double> want_w;
          RouteDefinition({logits.begin() + r * n_experts, logits.begin() + (r + 1) * n_experts}, k,
                          normalize, &want_ids, &want_w);
          for (int j = 0; j < k; ++j) {
            EXPECT_EQ(ids[r * k + j], want_ids[j]) << n_experts << " " << k << " row " << r;
            EXPECT_NEAR(w[r * k + j], want_w[j], 1e-6) << n_experts << " " << k;
          }
        }
      }
    }
  }
}

TEST(MoeRoutingTest, TiesGoToTheLowerExpertAndNaNRanksLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {1.0f, nan, 2.0f, 2.0f, 1.0f, 2.0f};
  std::vector<int32_t> ids(4);
  std::vector<float> w(4);
  RouteTopK(logits.data(), 1, 6, 4, /*normalize=*/true, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{2, 3, 5, 0}));
  EXPECT_EQ(w[0], w[1]);
  EXPECT_EQ(w[1], w[2]);
  EXPECT_NEAR(w[0] + w[1] + w[2] + w[3], 1.0f, 1e-6);
  const std::vector<float> all_nan = {nan, nan};
  RouteTopK(all_nan.data(), 1, 2, 2, true, ids.data(), w.data());
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 1);
  EXPECT_EQ(w[0], 0.0f);
}

// A row's routing is the same bits whatever rows surround it.
TEST(MoeRoutingTest, RowsAreIndependent) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  const int n = 16, k = 4, rows = 9;
  std::vector<float> logits(rows * n);
  for (float& v : logits) v = normal(rng);
  std::vector<int32_t> ids(rows * k), one_ids(k);
  std::vector<float> w(rows * k), one_w(k);
  RouteTopK(logits.data(), rows, n, k, false, ids.data(), w.data());
  for (int r = 0; r < rows; ++r) {
    RouteTopK(logits.data() + r * n, 1, n, k, false, one_ids.data(), one_w.data());
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(one_ids[j], ids[r * k + j]);
      EXPECT_EQ(one_w[j], w[r * k + j]);
    }
  }
}

}  // namespace
}  // namespace pagellm
