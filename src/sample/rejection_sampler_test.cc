// Rejection sampler: exact expectations for the greedy path and the random path's edge cases,
// and chi-square tests that the emitted tokens follow the TARGET distribution whatever the
// draft (overlapping, disjoint, constant, n-gram, top-k/top-p-truncated targets).
#include "sample/rejection_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "sample/sampler.h"

namespace pagellm {
namespace {

using Rows = std::vector<std::vector<float>>;

std::vector<float> Flatten(const Rows& rows) {
  std::vector<float> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return flat;
}

std::vector<float> OneHot(int32_t vocab, int32_t id) {
  std::vector<float> row(vocab, 0.0f);
  row[id] = 1.0f;
  return row;
}

std::vector<float> Normalized(std::vector<float> weights) {
  const float sum = std::accumulate(weights.begin(), weights.end(), 0.0f);
  for (float& w : weights) w /= sum;
  return weights;
}

RejectionResult Verify(const std::vector<int32_t>& drafts, const Rows& draft_rows,
                       const Rows& target_rows, bool greedy, SamplerState& state) {
  const std::vector<float> d = Flatten(draft_rows), t = Flatten(target_rows);
  return RejectionSample(drafts, d, t, static_cast<int32_t>(target_rows[0].size()), greedy, state);
}

// ------------------------------------------------------------------------------ greedy

TEST(RejectionSamplerTest, GreedyAllAcceptedAppendsBonus) {
  SamplerState state(1);
  const Rows target = {OneHot(8, 3), OneHot(8, 1), OneHot(8, 4), OneHot(8, 7)};
  const RejectionResult r = Verify({3, 1, 4}, {}, target, true, state);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{3, 1, 4, 7}));
  EXPECT_EQ(r.num_accepted, 3);
}

TEST(RejectionSamplerTest, GreedyFirstRejectedEmitsTargetToken) {
  SamplerState state(1);
  const Rows target = {OneHot(8, 3), OneHot(8, 1), OneHot(8, 4)};
  const RejectionResult r = Verify({2, 1}, {}, target, true, state);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{3}));
  EXPECT_EQ(r.num_accepted, 0);
}

TEST(RejectionSamplerTest, GreedyMiddleRejected) {
  SamplerState state(1);
  const Rows target = {OneHot(8, 3), OneHot(8, 2), OneHot(8, 4), OneHot(8, 0)};
  const RejectionResult r = Verify({3, 1, 4}, {}, target, true, state);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(r.num_accepted, 1);
}

// VerifyGreedy on target tokens gives what RejectionSample's greedy path gives on the one-hot
// rows of the same tokens: every accept/reject pattern of 4 drafts over a 3-token vocabulary.
TEST(RejectionSamplerTest, VerifyGreedyMatchesOneHotGreedyPath) {
  for (int code = 0; code < 81 * 243; ++code) {
    std::vector<int32_t> drafts(4), targets(5);
    int c = code;
    for (int32_t& d : drafts) d = c % 3, c /= 3;
    for (int32_t& t : targets) t = c % 3, c /= 3;
    Rows rows;
    for (int32_t t : targets) rows.push_back(OneHot(3, t));
    SamplerState state(1);
    const RejectionResult want = Verify(drafts, {}, rows, true, state);
    const RejectionResult got = VerifyGreedy(drafts, targets);
    ASSERT_EQ(got.tokens, want.tokens) << code;
    ASSERT_EQ(got.num_accepted, want.num_accepted) << code;
  }
}

TEST(RejectionSamplerTest, GreedyNoDraftsGivesBonusOnly) {
  SamplerState state(1);
  const RejectionResult r = Verify({}, {}, {OneHot(8, 6)}, true, state);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{6}));
  EXPECT_EQ(r.num_accepted, 0);
}

TEST(RejectionSamplerTest, GreedyIgnoresDraftProbsAndConsumesNoRandomness) {
  SamplerState state(42), fresh(42);
  // Draft probabilities are present (a draft model) but must not matter for greedy.
  const Rows draft = {OneHot(6, 0), OneHot(6, 0)};
  const Rows target = {OneHot(6, 5), OneHot(6, 2), OneHot(6, 1)};
  const RejectionResult r = Verify({5, 2}, draft, target, true, state);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{5, 2, 1}));
  EXPECT_EQ(state.NextBits(), fresh.NextBits());
}

TEST(RejectionSamplerTest, GreedyUsesArgmaxLowestIdOnTies) {
  SamplerState state(1);
  const Rows target = {{0.1f, 0.4f, 0.4f, 0.1f}, {0.7f, 0.1f, 0.1f, 0.1f}};
  EXPECT_EQ(Verify({1}, {}, target, true, state).tokens, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(Verify({2}, {}, target, true, state).tokens, (std::vector<int32_t>{1}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(ArgmaxProb(std::vector<float>{nan, 0.2f, 0.5f, nan}), 2);
  EXPECT_EQ(ArgmaxProb(std::vector<float>{nan, nan}), 0);
}

// ------------------------------------------------------------------- random: exact cases

TEST(RejectionSamplerTest, DraftEqualToTargetIsAlwaysAccepted) {
  const std::vector<float> p = {0.1f, 0.2f, 0.3f, 0.4f};
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SamplerState state(seed);
    const RejectionResult r = Verify({1, 3, 0}, {p, p, p}, {p, p, p, OneHot(4, 2)}, false, state);
    EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 3, 0, 2}));
    EXPECT_EQ(r.num_accepted, 3);
  }
}

TEST(RejectionSamplerTest, DisjointSupportsAlwaysReject) {
  const std::vector<float> target = {0.25f, 0.75f, 0.0f, 0.0f};
  const std::vector<float> draft = {0.0f, 0.0f, 0.5f, 0.5f};
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SamplerState state(seed);
    const RejectionResult r =
        Verify({2, 3}, {draft, draft}, {target, target, target}, false, state);
    ASSERT_EQ(r.tokens.size(), 1u);
    EXPECT_EQ(r.num_accepted, 0);
    EXPECT_TRUE(r.tokens[0] == 0 || r.tokens[0] == 1) << r.tokens[0];
  }
}

TEST(RejectionSamplerTest, NgramRejectionNeverReemitsTheDraftToken) {
  // p_t(0) = 0.5: accepted half the time; on rejection the residual is p_t without token 0.
  const std::vector<float> target = {0.5f, 0.3f, 0.2f, 0.0f};
  int accepted = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    SamplerState state(seed);
    const RejectionResult r =
        RejectionSample(std::vector<int32_t>{0}, {}, Flatten({target, target}), 4, false, state);
    if (r.num_accepted == 0) {
      ASSERT_EQ(r.tokens.size(), 1u);
      EXPECT_TRUE(r.tokens[0] == 1 || r.tokens[0] == 2) << r.tokens[0];
    } else {
      ++accepted;
      EXPECT_EQ(r.tokens[0], 0);
      EXPECT_NE(r.tokens[1], 3);
    }
  }
  EXPECT_GT(accepted, 140);
  EXPECT_LT(accepted, 260);
}

TEST(RejectionSamplerTest, ZeroDraftProbabilityAcceptsIffTargetCanProduceIt) {
  const std::vector<float> draft = {0.0f, 0.5f, 0.5f};
  const std::vector<float> target_has = {0.2f, 0.4f, 0.4f};
  const std::vector<float> target_lacks = {0.0f, 0.5f, 0.5f};  // == draft: residual is zero
  for (uint64_t seed = 0; seed < 100; ++seed) {
    SamplerState a(seed), b(seed);
    const RejectionResult yes = Verify({0}, {draft}, {target_has, OneHot(3, 2)}, false, a);
    EXPECT_EQ(yes.tokens, (std::vector<int32_t>{0, 2}));
    // Rejected; the residual max(p_t - p_d, 0) is all zero, so the token comes from p_t.
    const RejectionResult no = Verify({0}, {draft}, {target_lacks, OneHot(3, 2)}, false, b);
    ASSERT_EQ(no.tokens.size(), 1u);
    EXPECT_TRUE(no.tokens[0] == 1 || no.tokens[0] == 2) << no.tokens[0];
  }
}

TEST(RejectionSamplerTest, NanProbabilitiesGiveValidTokens) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> target = {nan, 0.5f, 0.5f, nan};
  const std::vector<float> draft = {0.25f, nan, 0.25f, 0.5f};
  for (uint64_t seed = 0; seed < 100; ++seed) {
    SamplerState state(seed);
    const RejectionResult r =
        Verify({0, 3}, {draft, draft}, {target, target, target}, false, state);
    // p_t(0) is NaN: never accepted; the residual's NaN entries carry no mass.
    ASSERT_EQ(r.tokens.size(), 1u);
    EXPECT_TRUE(r.tokens[0] == 1 || r.tokens[0] == 2) << r.tokens[0];
  }
  SamplerState state(3);
  const std::vector<float> all_nan = {nan, nan, nan};
  EXPECT_EQ(Verify({}, {}, {all_nan}, false, state).tokens, (std::vector<int32_t>{0}));
}

TEST(RejectionSamplerTest, ConsumesOneUniformPerExaminedDraftPlusOne) {
  const std::vector<float> target = {0.0f, 0.5f, 0.5f};
  const std::vector<float> draft = {1.0f, 0.0f, 0.0f};
  // Position 0 accepted (equal rows), position 1 rejected (disjoint): 2 + 1 draws.
  SamplerState state(9), reference(9);
  const RejectionResult r =
      Verify({1, 0, 0}, {target, draft, draft}, {target, target, target, target}, false, state);
  EXPECT_EQ(r.num_accepted, 1);
  for (int i = 0; i < 3; ++i) reference.NextBits();
  EXPECT_EQ(state.NextBits(), reference.NextBits());
}

TEST(RejectionSamplerTest, SameSeedReproduces) {
  const Rows target = {Normalized({1, 2, 3, 4, 5}), Normalized({5, 4, 3, 2, 1}),
                       Normalized({1, 1, 1, 1, 1})};
  const Rows draft = {Normalized({5, 1, 1, 1, 1}), Normalized({1, 1, 1, 1, 5})};
  std::vector<std::vector<int32_t>> first, second;
  SamplerState a(1234), b(1234), c(4321);
  bool differs = false;
  for (int i = 0; i < 50; ++i) {
    const auto ra = Verify({0, 4}, draft, target, false, a).tokens;
    const auto rb = Verify({0, 4}, draft, target, false, b).tokens;
    const auto rc = Verify({0, 4}, draft, target, false, c).tokens;
    EXPECT_EQ(ra, rb);
    differs |= ra != rc;
  }
  EXPECT_TRUE(differs);
}

// -------------------------------------------------------------------- random: statistics

// Regularized lower incomplete gamma P(a, x) by its power series (all terms positive, so no
// cancellation; converges for every x, in about x terms).
double LowerGammaP(double a, double x) {
  if (x <= 0) return 0;
  double term = 1.0 / a, sum = term;
  for (int n = 1; n < 100000 && term > sum * 1e-17; ++n) {
    term *= x / (a + n);
    sum += term;
  }
  return std::min(1.0, sum * std::exp(-x + a * std::log(x) - std::lgamma(a)));
}

// Upper-tail critical value of chi-square with `df` degrees of freedom: x with
// P(X > x) = alpha, by bisection on the exact CDF P(df/2, x/2).
double ChiSquareCritical(int df, double alpha) {
  double lo = 0, hi = 10.0 * df + 100;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (1.0 - LowerGammaP(0.5 * df, 0.5 * mid) > alpha ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

TEST(RejectionSamplerTest, ChiSquareCriticalMatchesTables) {
  // Standard table values at p = 0.001.
  EXPECT_NEAR(ChiSquareCritical(1, 1e-3), 10.828, 2e-3);
  EXPECT_NEAR(ChiSquareCritical(2, 1e-3), 13.816, 2e-3);
  EXPECT_NEAR(ChiSquareCritical(5, 1e-3), 20.515, 2e-3);
  EXPECT_NEAR(ChiSquareCritical(10, 1e-3), 29.588, 2e-3);
  EXPECT_NEAR(ChiSquareCritical(30, 1e-3), 59.703, 2e-3);
  // Wilson-Hilferty agrees closely for larger df (z = 3.0902 for the upper 0.1%).
  const double df = 30, z = 3.090232306;
  const double wh = df * std::pow(1 - 2 / (9 * df) + z * std::sqrt(2 / (9 * df)), 3);
  EXPECT_NEAR(ChiSquareCritical(30, 1e-3), wh, 0.3);
}

struct Fit {
  double chi2 = 0;
  int df = 0;
  double critical = 0;
};

// Pearson chi-square of `counts` against probabilities `expected` (need not be exactly
// normalized: float rows). Cells with expected probability 0 must be empty (checked). Cells
// whose expected count is below 5 are pooled; a pool still below 5 joins the smallest cell.
Fit GoodnessOfFit(const std::vector<int64_t>& counts, const std::vector<float>& expected,
                  const std::string& what) {
  const int64_t n = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  double mass = 0;
  for (float p : expected) mass += p > 0 ? p : 0;
  std::vector<std::pair<double, double>> cells;  // (expected count, observed)
  std::pair<double, double> pool{0, 0};
  for (size_t i = 0; i < counts.size(); ++i) {
    if (!(expected[i] > 0)) {
      EXPECT_EQ(counts[i], 0) << what << ": token " << i << " has target probability 0";
      continue;
    }
    const double e = n * expected[i] / mass;
    if (e < 5) {
      pool.first += e;
      pool.second += counts[i];
    } else {
      cells.emplace_back(e, counts[i]);
    }
  }
  if (pool.first > 0) {
    if (pool.first >= 5 || cells.empty()) {
      cells.push_back(pool);
    } else {
      auto smallest = std::min_element(cells.begin(), cells.end());
      smallest->first += pool.first;
      smallest->second += pool.second;
    }
  }
  Fit fit;
  for (const auto& [e, o] : cells) fit.chi2 += (o - e) * (o - e) / e;
  fit.df = static_cast<int>(cells.size()) - 1;
  fit.critical = fit.df > 0 ? ChiSquareCritical(fit.df, 1e-3) : 0;
  return fit;
}

void ExpectFits(const std::vector<int64_t>& counts, const std::vector<float>& expected,
                const std::string& what) {
  const Fit fit = GoodnessOfFit(counts, expected, what);
  if (fit.df == 0) return;  // a single cell: only the support check applies
  EXPECT_LT(fit.chi2, fit.critical)
      << what << ": chi2 " << fit.chi2 << " with " << fit.df << " dof";
}

// One verification setup: k+1 target rows, and either k draft rows (drafts sampled from them,
// as a draft model would) or none with fixed n-gram drafts.
struct Case {
  std::string name;
  Rows target;
  Rows draft;
  std::vector<int32_t> ngram_drafts;
};

struct Tally {
  std::vector<int64_t> first, second, draft_first;
  int64_t accepted_first = 0;
};

Tally RunTrials(const Case& c, int trials, uint64_t seed) {
  const int32_t vocab = static_cast<int32_t>(c.target[0].size());
  const size_t k = c.draft.empty() ? c.ngram_drafts.size() : c.draft.size();
  const std::vector<float> target = Flatten(c.target), draft = Flatten(c.draft);
  SamplerState state(seed), draft_rng(seed ^ 0x5eed5eedULL);
  Tally t{std::vector<int64_t>(vocab), std::vector<int64_t>(vocab), std::vector<int64_t>(vocab)};
  std::vector<int32_t> drafts(k);
  for (int trial = 0; trial < trials; ++trial) {
    for (size_t i = 0; i < k; ++i) {
      drafts[i] = c.draft.empty() ? c.ngram_drafts[i] : SampleFromProbs(c.draft[i], draft_rng);
    }
    const RejectionResult r = RejectionSample(drafts, draft, target, vocab, false, state);
    EXPECT_EQ(r.tokens.size(), static_cast<size_t>(r.num_accepted) + 1);
    ++t.first[r.tokens[0]];
    ++t.draft_first[drafts[0]];
    if (r.num_accepted >= 1) {
      ++t.accepted_first;
      ++t.second[r.tokens[1]];
    }
  }
  return t;
}

// Probability that the first draft is accepted: sum_x p_d(x) min(1, p_t(x)/p_d(x)) =
// sum_x min(p_d(x), p_t(x)).
double ExpectedAcceptance(const Case& c) {
  double a = 0;
  for (size_t x = 0; x < c.target[0].size(); ++x) {
    const double pd =
        c.draft.empty() ? (static_cast<int32_t>(x) == c.ngram_drafts[0]) : c.draft[0][x];
    a += std::min<double>(pd, c.target[0][x]);
  }
  return a;
}

void CheckCase(const Case& c, uint64_t seed) {
  constexpr int kTrials = 100000;
  const Tally t = RunTrials(c, kTrials, seed);
  ExpectFits(t.first, c.target[0], c.name + " first token");
  if (t.accepted_first >= 1000) {
    ExpectFits(t.second, c.target[1], c.name + " second token | first accepted");
  }
  // Acceptance count is Binomial(n, a): within 5 standard deviations.
  const double a = ExpectedAcceptance(c);
  const double sd = std::sqrt(kTrials * a * (1 - a));
  EXPECT_NEAR(static_cast<double>(t.accepted_first), kTrials * a, 5 * sd + 1e-9) << c.name;
}

TEST(RejectionSamplerStatsTest, OverlappingSupports) {
  CheckCase({"overlapping",
             {Normalized({1, 2, 3, 4, 5, 6, 7, 8}), Normalized({8, 1, 6, 1, 4, 1, 2, 1}),
              Normalized({1, 1, 2, 2, 3, 3, 4, 4}), Normalized({3, 1, 4, 1, 5, 9, 2, 6})},
             {Normalized({8, 7, 6, 5, 4, 3, 2, 1}), Normalized({1, 1, 1, 1, 1, 1, 1, 1}),
              Normalized({0, 0, 0, 1, 1, 1, 0, 9})},
             {}},
            1);
  // k = 1: the second token, when the draft is accepted, is the bonus token from row 1.
  CheckCase({"overlapping, bonus",
             {Normalized({1, 2, 3, 4, 5, 6, 7, 8}), Normalized({8, 1, 6, 1, 4, 1, 2, 1})},
             {Normalized({8, 7, 6, 5, 4, 3, 2, 1})},
             {}},
            12);
}

TEST(RejectionSamplerStatsTest, PartialOverlapWithZeros) {
  // Draft mass outside the target's support and target mass outside the draft's.
  CheckCase({"partial overlap",
             {Normalized({0, 0, 1, 2, 3, 4, 0, 5}), Normalized({6, 0, 0, 1, 1, 0, 2, 0}),
              Normalized({1, 1, 1, 1, 1, 1, 1, 1})},
             {Normalized({4, 4, 1, 1, 0, 0, 2, 0}), Normalized({1, 2, 0, 0, 3, 3, 0, 1})},
             {}},
            2);
}

TEST(RejectionSamplerStatsTest, DisjointSupports) {
  const Case c{"disjoint",
               {Normalized({1, 2, 3, 4, 0, 0, 0, 0}), Normalized({4, 3, 2, 1, 0, 0, 0, 0}),
                Normalized({1, 1, 1, 1, 1, 1, 1, 1})},
               {Normalized({0, 0, 0, 0, 1, 1, 1, 1}), Normalized({0, 0, 0, 0, 4, 3, 2, 1})},
               {}};
  CheckCase(c, 3);
  EXPECT_EQ(RunTrials(c, 1000, 4).accepted_first, 0);
}

TEST(RejectionSamplerStatsTest, DraftAlwaysProposesTheSameToken) {
  CheckCase({"constant draft",
             {Normalized({1, 2, 3, 4, 5, 6}), Normalized({6, 5, 4, 3, 2, 1}),
              Normalized({2, 2, 1, 1, 3, 3}), Normalized({1, 1, 1, 1, 1, 1})},
             {OneHot(6, 2), OneHot(6, 2), OneHot(6, 2)},
             {}},
            5);
}

TEST(RejectionSamplerStatsTest, NgramDraftsWithoutProbabilities) {
  CheckCase({"ngram",
             {Normalized({1, 2, 3, 4, 5, 6}), Normalized({6, 5, 4, 3, 2, 1}),
              Normalized({2, 2, 1, 1, 3, 3}), Normalized({1, 1, 1, 1, 1, 1})},
             {},
             {5, 0, 3}},
            6);
  CheckCase({"ngram, bonus", {Normalized({1, 2, 3, 4}), Normalized({4, 0, 1, 3})}, {}, {3}}, 13);
  // A drafted token the target cannot produce is always rejected.
  CheckCase({"ngram impossible", {Normalized({1, 2, 0, 4}), Normalized({1, 1, 1, 1})}, {}, {2}}, 7);
}

TEST(RejectionSamplerStatsTest, TruncatedTargetsFromComputeProbs) {
  // Targets and drafts are the Sampler's processed distributions on fixed logits, with
  // top-k / top-p / min-p / temperature as a request would set them.
  const std::vector<float> logits_a = {1.0f,  0.5f, 2.0f, -1.0f, 0.0f, 1.5f,
                                       -0.5f, 0.8f, 0.3f, -2.0f, 1.2f, 0.1f};
  const std::vector<float> logits_b = {0.2f, 1.8f, 0.4f,  0.9f, -0.3f, 1.1f,
                                       0.0f, 2.2f, -1.0f, 0.6f, 0.7f,  -0.2f};
  auto probs = [](const std::vector<float>& logits, float temperature, int top_k, float top_p,
                  float min_p) {
    SamplingParams params;
    params.temperature = temperature;
    params.top_k = top_k;
    params.top_p = top_p;
    params.min_p = min_p;
    Sampler sampler;
    std::vector<float> out(logits.size());
    sampler.ComputeProbs(logits, SamplingInput{params, {}, {}, {}}, out);
    return out;
  };
  const Rows target = {probs(logits_a, 0.9f, 4, 1.0f, 0.0f), probs(logits_b, 0.8f, 0, 0.7f, 0.0f),
                       probs(logits_a, 1.2f, 6, 0.9f, 0.0f), probs(logits_b, 1.0f, 0, 1.0f, 0.2f)};
  // The truncation really removed tokens (otherwise this case would not test it).
  EXPECT_EQ(std::count(target[0].begin(), target[0].end(), 0.0f), 8);
  EXPECT_GT(std::count(target[1].begin(), target[1].end(), 0.0f), 4);
  CheckCase({"top-k/top-p targets, full draft",
             target,
             {probs(logits_b, 1.0f, 0, 1.0f, 0.0f), probs(logits_a, 1.0f, 0, 1.0f, 0.0f),
              probs(logits_b, 1.3f, 0, 1.0f, 0.0f)},
             {}},
            8);
  CheckCase({"top-k/top-p targets, truncated draft",
             target,
             {probs(logits_b, 0.7f, 5, 0.9f, 0.0f), probs(logits_a, 0.7f, 3, 1.0f, 0.0f),
              probs(logits_b, 1.0f, 0, 0.5f, 0.0f)},
             {}},
            9);
  CheckCase({"top-k/top-p targets, ngram", target, {}, {2, 7, 0}}, 10);
}

TEST(RejectionSamplerStatsTest, TestHasPowerAgainstAcceptAll) {
  // Control: emitting the drafts unverified (what a sampler that always accepted would do)
  // fails the same test, so passing it above means something.
  const Case c{"control",
               {Normalized({1, 2, 3, 4, 5, 6, 7, 8}), Normalized({1, 1, 1, 1, 1, 1, 1, 1})},
               {Normalized({8, 7, 6, 5, 4, 3, 2, 1})},
               {}};
  const Tally t = RunTrials(c, 100000, 11);
  const Fit fit = GoodnessOfFit(t.draft_first, c.target[0], "control");
  EXPECT_GT(fit.chi2, 10 * fit.critical);
}

}  // namespace
}  // namespace pagellm
