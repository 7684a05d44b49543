// Sampler on hand-made logits: exact expectations for every processing step, reproducibility,
// and chi-square checks that draws follow the documented distribution.
#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace pagellm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Request {
  SamplingParams params;
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
  std::vector<int32_t> eos;
  SamplingInput input() const { return SamplingInput{params, prompt, output, eos}; }
};

SampleResult SampleOnce(const std::vector<float>& logits, const Request& r, uint64_t seed = 1) {
  Sampler sampler;
  SamplerState state(seed);
  return sampler.Sample(logits, r.input(), state);
}

std::vector<float> Probs(const std::vector<float>& logits, const Request& r) {
  Sampler sampler;
  std::vector<float> probs(logits.size());
  sampler.ComputeProbs(logits, r.input(), probs);
  return probs;
}

std::vector<double> Softmax(const std::vector<float>& logits, double temperature) {
  double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    sum += p[i] = std::exp((logits[i] - max) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

std::vector<float> LogOf(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

void ExpectProbs(const std::vector<float>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-6) << "token " << i;
  }
}

// ---------------------------------------------------------------- greedy

TEST(SamplerTest, GreedyPicksArgmax) {
  Request r;
  r.params.temperature = 0.0f;
  EXPECT_EQ(SampleOnce({1.0f, 3.0f, 2.0f, -5.0f}, r).token, 1);
}

// GreedyToken (the no-copy argmax for speculative verification) picks what Sample() picks for
// a greedy request: random rows with ties, NaN and +-inf, with and without the processing
// (bias, min_tokens, penalties) that sends it down Sample()'s own path.
TEST(SamplerTest, GreedyTokenMatchesGreedySample) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(0, 5);  // few distinct values: many ties
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<float> logits(37);
    for (float& x : logits) x = static_cast<float>(level(rng)) * 0.5f;
    if (trial % 4 == 1) logits[rng() % 37] = std::numeric_limits<float>::quiet_NaN();
    if (trial % 4 == 2) logits[rng() % 37] = kInf;
    if (trial % 8 == 3) std::fill(logits.begin(), logits.end(), -kInf);
    Request r;
    r.params.temperature = 0;
    r.prompt = {1, 2, 3};
    r.output = {4, static_cast<int32_t>(rng() % 37)};
    r.eos = {static_cast<int32_t>(rng() % 37)};
    switch (trial % 5) {
      case 1:
        r.params.logit_bias.push_back({static_cast<int32_t>(rng() % 37), 3.0f});
        break;
      case 2:
        r.params.min_tokens = 5;
        break;
      case 3:
        r.params.repetition_penalty = 1.3f;
        break;
      case 4:
        r.params.presence_penalty = 0.7f;
        break;
      default:
        break;
    }
    Sampler sampler;
    EXPECT_EQ(sampler.GreedyToken(logits, r.input()), SampleOnce(logits, r).token)
        << "trial " << trial;
    // And the one-hot row ComputeProbs gives greedy requests is hot at the same id.
    const std::vector<float> probs = Probs(logits, r);
    EXPECT_EQ(probs[sampler.GreedyToken(logits, r.input())], 1.0f) << "trial " << trial;
  }
}

TEST(SamplerTest, GreedyTiesGoToLowestId) {
  Request r;
  r.params.temperature = 0.0f;
  EXPECT_EQ(SampleOnce({1.0f, 5.0f, 5.0f, 2.0f, 5.0f}, r).token, 1);
}

TEST(SamplerTest, GreedyDoesNotConsumeRandomness) {
  Request r;
  r.params.temperature = 0.0f;
  Sampler sampler;
  SamplerState a(7), b(7);
  sampler.Sample(std::vector<float>{1, 2}, r.input(), a);
  EXPECT_EQ(a.NextBits(), b.NextBits());
}

TEST(SamplerTest, TinyTemperatureIsClampedNotGreedy) {
  SamplingParams p;
  p.temperature = 1e-6f;
  EXPECT_FLOAT_EQ(Sampler::EffectiveTemperature(p), 0.01f);
  EXPECT_FALSE(Sampler::IsGreedy(p));
  p.temperature = 0.0f;
  EXPECT_TRUE(Sampler::IsGreedy(p));
  p.temperature = 0.5f;
  EXPECT_FLOAT_EQ(Sampler::EffectiveTemperature(p), 0.5f);
}

TEST(SamplerTest, TopK1IsGreedy) {
  Request r;
  r.params.temperature = 1.5f;
  r.params.top_k = 1;
  const std::vector<float> logits = {0.3f, 0.1f, 0.29f, -1.0f, 0.2f};
  for (uint64_t seed = 0; seed < 200; ++seed) EXPECT_EQ(SampleOnce(logits, r, seed).token, 0);
  ExpectProbs(Probs(logits, r), {1, 0, 0, 0, 0});
}

TEST(SamplerTest, AllMinusInfinityGivesTokenZero) {
  Request r;
  std::vector<float> logits(4, -kInf);
  EXPECT_EQ(SampleOnce(logits, r).token, 0);
  r.params.temperature = 0.0f;
  EXPECT_EQ(SampleOnce(logits, r).token, 0);
}

TEST(SamplerTest, NanLogitsAreNeverSampled) {
  Request r;
  const std::vector<float> logits = {NAN, 0.0f, NAN};
  for (uint64_t seed = 0; seed < 50; ++seed) EXPECT_EQ(SampleOnce(logits, r, seed).token, 1);
}

// ---------------------------------------------------------------- truncation

TEST(SamplerTest, TopPKeepsSmallestSetReachingP) {
  Request r;
  const std::vector<float> logits = LogOf({0.5, 0.3, 0.15, 0.05});
  r.params.top_p = 0.7f;  // 0.5 < 0.7, 0.5 + 0.3 >= 0.7
  ExpectProbs(Probs(logits, r), {0.625, 0.375, 0, 0});
  r.params.top_p = 0.85f;  // needs the third token too
  ExpectProbs(Probs(logits, r), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0});
  r.params.top_p = 0.45f;  // the top token alone suffices
  ExpectProbs(Probs(logits, r), {1, 0, 0, 0});
  r.params.top_p = 1.0f;
  ExpectProbs(Probs(logits, r), {0.5, 0.3, 0.15, 0.05});
}

TEST(SamplerTest, TopPIsComputedAfterTemperature) {
  Request r;
  r.params.temperature = 0.5f;  // squares 0.5/0.3/0.2: the top token alone has 0.66
  const std::vector<float> logits = LogOf({0.5, 0.3, 0.2});
  r.params.top_p = 0.6f;
  ExpectProbs(Probs(logits, r), {1, 0, 0});
  r.params.temperature = 1.0f;
  ExpectProbs(Probs(logits, r), {0.625, 0.375, 0});
}

TEST(SamplerTest, TopPTieAtBoundaryKeepsLowerId) {
  Request r;
  r.params.top_p = 0.3f;
  // Four equal tokens: 0.25 < 0.3 keeps a second one; among equals the lower ids come first.
  ExpectProbs(Probs({0, 0, 0, 0}, r), {0.5, 0.5, 0, 0});
}

TEST(SamplerTest, TopPOnLargeVocabularyMatchesFullSort) {
  // Exercises the chunked partial selection (thousands of kept tokens) against a reference
  // that sorts everything.
  const int vocab = 20000;
  std::vector<float> logits(vocab);
  SamplerState rng(123);
  for (float& l : logits) l = static_cast<float>(rng.NextUniform() * 4.0);
  for (float top_p : {0.05f, 0.5f, 0.9f, 0.999f}) {
    Request r;
    r.params.top_p = top_p;
    r.params.temperature = 0.8f;
    std::vector<float> probs = Probs(logits, r);

    std::vector<double> full = Softmax(logits, 0.8);
    std::vector<int> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return full[a] > full[b] || (full[a] == full[b] && a < b); });
    std::vector<bool> keep(vocab, false);
    double head = 0;
    int kept = 0;
    for (int id : order) {
      if (head >= top_p) break;
      keep[id] = true;
      head += full[id];
      ++kept;
    }
    // Float vs double rounding may move the boundary by one token at most.
    int mismatches = 0;
    double sum = 0;
    for (int i = 0; i < vocab; ++i) {
      sum += probs[i];
      mismatches += (probs[i] > 0) != keep[i] ? 1 : 0;
    }
    EXPECT_LE(mismatches, 1) << "top_p " << top_p << " kept " << kept;
    EXPECT_GT(kept, 1);
    EXPECT_NEAR(sum, 1.0, 1e-4);
  }
}

TEST(SamplerTest, TopPOnAFlatDistributionKeepsTheLowestIds) {
  // Every token in one histogram bucket: the boundary search runs over the whole vocabulary.
  const int vocab = 10000;
  std::vector<float> logits(vocab, 0.0f);
  Request r;
  r.params.top_p = 0.5f;
  std::vector<float> probs = Probs(logits, r);
  for (int i = 0; i < vocab; ++i) {
    ASSERT_FLOAT_EQ(probs[i], i < 5000 ? 1.0f / 5000 : 0.0f) << i;
  }
}

TEST(SamplerTest, TopPIsAppliedAfterTopK) {
  Request r;
  const std::vector<float> logits = LogOf({0.4, 0.3, 0.2, 0.1});
  r.params.top_k = 3;  // renormalized: 4/9, 3/9, 2/9
  ExpectProbs(Probs(logits, r), {4.0 / 9, 3.0 / 9, 2.0 / 9, 0});
  r.params.top_p = 0.7f;  // 4/9 < 0.7 <= 7/9
  ExpectProbs(Probs(logits, r), {4.0 / 7, 3.0 / 7, 0, 0});
}

TEST(SamplerTest, TopKKeepsKLargestAndTiesAtTheBoundary) {
  Request r;
  r.params.top_k = 2;
  const std::vector<float> logits = {2.0f, 1.0f, 1.0f, 0.0f, -1.0f};
  std::vector<double> expected = Softmax({2.0f, 1.0f, 1.0f}, 1.0);
  expected.push_back(0);
  expected.push_back(0);
  ExpectProbs(Probs(logits, r), expected);
  r.params.top_k = 10;  // more than the vocabulary: no-op
  ExpectProbs(Probs(logits, r), Softmax(logits, 1.0));
  r.params.top_k = -1;  // disabled
  ExpectProbs(Probs(logits, r), Softmax(logits, 1.0));
}

TEST(SamplerTest, TopKOnLargeVocabulary) {
  const int vocab = 50000;
  std::vector<float> logits(vocab);
  for (int i = 0; i < vocab; ++i) logits[i] = static_cast<float>((i * 7919) % vocab) / 1000.0f;
  for (int k : {1, 5, 40, 5000}) {
    Request r;
    r.params.top_k = k;
    std::vector<float> probs = Probs(logits, r);
    int kept = 0;
    for (int i = 0; i < vocab; ++i) {
      if (probs[i] > 0) {
        ++kept;
        EXPECT_GE(logits[i], static_cast<float>(vocab - k) / 1000.0f);
      }
    }
    EXPECT_EQ(kept, k);
  }
}

TEST(SamplerTest, MinPDropsTokensBelowFractionOfTheTopProbability) {
  Request r;
  const std::vector<float> logits = LogOf({0.5, 0.3, 0.15, 0.05});
  r.params.min_p = 0.25f;  // threshold 0.125
  ExpectProbs(Probs(logits, r), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0});
  r.params.min_p = 0.5f;  // threshold 0.25
  ExpectProbs(Probs(logits, r), {0.625, 0.375, 0, 0});
  r.params.min_p = 1.0f;
  ExpectProbs(Probs(logits, r), {1, 0, 0, 0});
}

TEST(SamplerTest, MinPIsAppliedBeforeTopPAsInVllmV1) {
  Request r;
  const std::vector<float> logits = LogOf({0.5, 0.3, 0.2});
  r.params.min_p = 0.5f;  // drops 0.2; renormalized 0.625 / 0.375
  r.params.top_p = 0.6f;  // 0.625 alone reaches 0.6 (top_p first would have kept two)
  ExpectProbs(Probs(logits, r), {1, 0, 0});
}

// ---------------------------------------------------------------- logit processors

// With temperature 1 and no truncation, log p_i - log p_j equals the processed logit
// difference, which lets the tests read processed logits back exactly.
std::vector<double> ProcessedLogitsRelativeTo(const std::vector<float>& logits, const Request& r,
                                              int ref) {
  std::vector<float> p = Probs(logits, r);
  std::vector<double> out;
  for (float x : p) out.push_back(x > 0 ? std::log(x) - std::log(p[ref]) : -INFINITY);
  return out;
}

TEST(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  Request r;
  r.params.repetition_penalty = 2.0f;
  r.prompt = {0, 1};  // prompt tokens count for repetition
  r.output = {2};
  const std::vector<float> logits = {3.0f, -1.0f, 2.0f, 0.5f};
  // Processed: 1.5, -2.0, 1.0, 0.5 (token 3 unseen).
  std::vector<double> rel = ProcessedLogitsRelativeTo(logits, r, 3);
  EXPECT_NEAR(rel[0], 1.5 - 0.5, 1e-5);
  EXPECT_NEAR(rel[1], -2.0 - 0.5, 1e-5);
  EXPECT_NEAR(rel[2], 1.0 - 0.5, 1e-5);
}

TEST(SamplerTest, FrequencyPenaltyScalesWithOutputCountOnly) {
  Request r;
  r.params.frequency_penalty = 0.5f;
  r.prompt = {0, 0, 0};  // the prompt does not count
  r.output = {1, 1, 1, 2};
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<double> rel = ProcessedLogitsRelativeTo(logits, r, 3);
  EXPECT_NEAR(rel[0], 0.0, 1e-5);
  EXPECT_NEAR(rel[1], -1.5, 1e-5);
  EXPECT_NEAR(rel[2], -0.5, 1e-5);
}

TEST(SamplerTest, PresencePenaltyIsFlatOverOutputTokens) {
  Request r;
  r.params.presence_penalty = -0.75f;  // negative encourages repeats
  r.prompt = {0};
  r.output = {1, 1, 1, 2};
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<double> rel = ProcessedLogitsRelativeTo(logits, r, 3);
  EXPECT_NEAR(rel[0], 0.0, 1e-5);
  EXPECT_NEAR(rel[1], 0.75, 1e-5);
  EXPECT_NEAR(rel[2], 0.75, 1e-5);
}

TEST(SamplerTest, PenaltiesCombineInVllmOrder) {
  Request r;
  r.params.repetition_penalty = 2.0f;
  r.params.frequency_penalty = 0.5f;
  r.params.presence_penalty = 0.25f;
  r.prompt = {0};
  r.output = {1, 1, 3};
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 1.0f};
  // 0: 2/2 = 1. 1: -1*2 - 0.5*2 - 0.25 = -3.25. 3: 1/2 - 0.5 - 0.25 = -0.25. 2: 0.5.
  std::vector<double> rel = ProcessedLogitsRelativeTo(logits, r, 2);
  EXPECT_NEAR(rel[0], 0.5, 1e-5);
  EXPECT_NEAR(rel[1], -3.75, 1e-5);
  EXPECT_NEAR(rel[3], -0.75, 1e-5);
  // Scratch state is reset between calls: a second request without penalties is untouched.
  Sampler sampler;
  std::vector<float> probs(4);
  sampler.ComputeProbs(logits, r.input(), probs);
  Request plain;
  plain.output = {1, 1, 3};
  sampler.ComputeProbs(logits, plain.input(), probs);
  std::vector<double> want = Softmax(logits, 1.0);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(probs[i], want[i], 1e-6);
}

TEST(SamplerTest, PenaltiesChangeGreedyChoice) {
  Request r;
  r.params.temperature = 0.0f;
  r.params.frequency_penalty = 1.0f;
  r.output = {0};
  EXPECT_EQ(SampleOnce({1.0f, 0.5f}, r).token, 1);
}

TEST(SamplerTest, LogitBiasIsAdded) {
  Request r;
  r.params.temperature = 0.0f;
  r.params.logit_bias = {{2, 100.0f}};
  EXPECT_EQ(SampleOnce({5.0f, 4.0f, -20.0f}, r).token, 2);
  Request s;
  s.params.logit_bias = {{1, 1.5f}, {0, -0.5f}};
  std::vector<double> rel = ProcessedLogitsRelativeTo({0.0f, 0.0f, 0.0f}, s, 2);
  EXPECT_NEAR(rel[0], -0.5, 1e-5);
  EXPECT_NEAR(rel[1], 1.5, 1e-5);
}

TEST(SamplerTest, MinTokensMasksEosAndStopTokenIds) {
  Request r;
  r.params.temperature = 0.0f;
  r.params.min_tokens = 2;
  r.params.stop_token_ids = {1};
  r.eos = {3};
  const std::vector<float> logits = {0.0f, 4.0f, 1.0f, 5.0f};
  r.output = {7};  // one generated so far: EOS (3) and stop id (1) masked
  EXPECT_EQ(SampleOnce(logits, r).token, 2);
  r.output = {7, 7};  // min_tokens reached
  EXPECT_EQ(SampleOnce(logits, r).token, 3);
  // vLLM masks EOS under min_tokens even with ignore_eos.
  r.params.ignore_eos = true;
  r.output = {};
  EXPECT_EQ(SampleOnce(logits, r).token, 2);
  // Random sampling never draws a masked id either.
  r.params.temperature = 1.0f;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    int32_t t = SampleOnce(logits, r, seed).token;
    EXPECT_TRUE(t == 0 || t == 2) << t;
  }
}

// ---------------------------------------------------------------- logprobs

TEST(SamplerTest, LogprobsAreRawLogSoftmaxSortedWithRank) {
  Request r;
  r.params.temperature = 0.0f;
  r.params.logprobs = 3;
  r.params.logit_bias = {{4, 100.0f}};  // forces token 4, must not change logprobs
  r.params.repetition_penalty = 1.7f;
  r.prompt = {0};
  const std::vector<float> logits = {2.0f, 1.0f, 2.0f, -1.0f, 0.5f, 1.0f};
  SampleResult res = SampleOnce(logits, r);
  ASSERT_EQ(res.token, 4);
  std::vector<double> p = Softmax(logits, 1.0);
  ASSERT_TRUE(res.logprob.has_value());
  EXPECT_NEAR(*res.logprob, std::log(p[4]), 1e-5);
  EXPECT_EQ(res.rank, 5);  // 2, 2, 1, 1, 0.5 are >= 0.5
  ASSERT_EQ(res.top_logprobs.size(), 3u);
  EXPECT_EQ(res.top_logprobs[0].id, 0);  // tie 0/2: lower id first
  EXPECT_EQ(res.top_logprobs[1].id, 2);
  EXPECT_EQ(res.top_logprobs[2].id, 1);  // tie 1/5
  EXPECT_NEAR(res.top_logprobs[0].logprob, std::log(p[0]), 1e-5);
  EXPECT_NEAR(res.top_logprobs[2].logprob, std::log(p[1]), 1e-5);
}

TEST(SamplerTest, LogprobsIgnoreTemperature) {
  Request r;
  r.params.temperature = 0.3f;
  r.params.logprobs = 0;
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  SampleResult res = SampleOnce(logits, r, 5);
  std::vector<double> p = Softmax(logits, 1.0);
  ASSERT_TRUE(res.logprob.has_value());
  EXPECT_NEAR(*res.logprob, std::log(p[res.token]), 1e-5);
  EXPECT_TRUE(res.top_logprobs.empty());
}

TEST(SamplerTest, NoLogprobsUnlessRequested) {
  Request r;
  SampleResult res = SampleOnce({1.0f, 2.0f}, r);
  EXPECT_FALSE(res.logprob.has_value());
  EXPECT_EQ(res.rank, 0);
  EXPECT_TRUE(res.top_logprobs.empty());
}

TEST(SamplerTest, LogprobsMinusOneListsWholeVocabulary) {
  Request r;
  r.params.logprobs = -1;
  const std::vector<float> logits = {0.1f, 0.4f, 0.3f, 0.2f};
  SampleResult res = SampleOnce(logits, r);
  ASSERT_EQ(res.top_logprobs.size(), 4u);
  EXPECT_EQ(res.top_logprobs[0].id, 1);
  EXPECT_EQ(res.top_logprobs[1].id, 2);
  EXPECT_EQ(res.top_logprobs[2].id, 3);
  EXPECT_EQ(res.top_logprobs[3].id, 0);
}

TEST(SamplerTest, TopLogprobsOnLargeVocabulary) {
  const int vocab = 152064;
  std::vector<float> logits(vocab);
  SamplerState rng(9);
  for (float& l : logits) l = static_cast<float>(rng.NextUniform() * 10.0 - 5.0);
  Request r;
  r.params.logprobs = 20;
  r.params.top_p = 0.9f;
  SampleResult res = SampleOnce(logits, r);
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 20, order.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  ASSERT_EQ(res.top_logprobs.size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(res.top_logprobs[i].id, order[i]);
}

// ---------------------------------------------------------------- reproducibility

std::vector<int32_t> Generate(uint64_t seed, int n) {
  Request r;
  r.params.temperature = 0.9f;
  r.params.top_p = 0.95f;
  r.params.frequency_penalty = 0.3f;
  r.prompt = {1, 2, 3};
  Sampler sampler;
  SamplerState state(seed);
  std::vector<float> logits(64);
  for (int step = 0; step < n; ++step) {
    for (int i = 0; i < 64; ++i) logits[i] = std::sin(0.37f * i + 0.11f * step);
    r.output.push_back(sampler.Sample(logits, r.input(), state).token);
  }
  return r.output;
}

TEST(SamplerTest, SameSeedSameSequenceDifferentSeedDifferent) {
  EXPECT_EQ(Generate(42, 100), Generate(42, 100));
  EXPECT_NE(Generate(42, 100), Generate(43, 100));
}

TEST(SamplerTest, SeededRequestIndependentOfOtherRequests) {
  // Request A alone vs interleaved with B on the same Sampler: A's tokens are unchanged.
  const std::vector<int32_t> alone = Generate(42, 30);
  Request a, b;
  a.params.temperature = 0.9f;
  a.params.top_p = 0.95f;
  a.params.frequency_penalty = 0.3f;
  a.prompt = {1, 2, 3};
  b.params.temperature = 1.3f;
  b.params.top_k = 5;
  Sampler sampler;
  SamplerState sa(42), sb(999);
  std::vector<float> logits(64), other(64, 0.0f);
  for (int step = 0; step < 30; ++step) {
    for (int i = 0; i < 64; ++i) logits[i] = std::sin(0.37f * i + 0.11f * step);
    b.output.push_back(sampler.Sample(other, b.input(), sb).token);
    a.output.push_back(sampler.Sample(logits, a.input(), sa).token);
  }
  EXPECT_EQ(a.output, alone);
}

TEST(SamplerTest, UnseededRequestsTakeSeedsFromTheEngineSource) {
  SeedSource one(5), two(5), three(6);
  SamplerState a(std::nullopt, one), b(std::nullopt, two), c(std::nullopt, three);
  EXPECT_EQ(a.NextBits(), b.NextBits());
  EXPECT_NE(b.NextBits(), c.NextBits());
  // An explicit seed wins and leaves the source untouched.
  SeedSource src(5);
  SamplerState seeded(std::optional<uint64_t>(77), src);
  SamplerState plain(77);
  EXPECT_EQ(seeded.NextBits(), plain.NextBits());
  SeedSource fresh(5);
  EXPECT_EQ(src.Next(), fresh.Next());
}

// ---------------------------------------------------------------- distribution

// Chi-square statistic of 100k draws against `expected`; tokens with expected probability 0
// must never be drawn. Critical value for 5 degrees of freedom at p = 0.001 is 20.52; with a
// fixed seed the test is deterministic.
double ChiSquare(const std::vector<float>& logits, const Request& r,
                 const std::vector<double>& expected, uint64_t seed) {
  constexpr int kDraws = 100000;
  Sampler sampler;
  SamplerState state(seed);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < kDraws; ++i) ++counts[sampler.Sample(logits, r.input(), state).token];
  double chi2 = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (expected[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i;
      continue;
    }
    const double e = expected[i] * kDraws;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

const std::vector<float> kSix = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, -1.0f};

TEST(SamplerTest, TemperatureSamplingMatchesSoftmax) {
  Request r;
  r.params.temperature = 0.7f;
  EXPECT_LT(ChiSquare(kSix, r, Softmax(kSix, 0.7), 2024), 20.52);
  r.params.temperature = 1.0f;
  EXPECT_LT(ChiSquare(kSix, r, Softmax(kSix, 1.0), 7), 20.52);
}

TEST(SamplerTest, TopKSamplingMatchesRenormalizedSoftmax) {
  Request r;
  r.params.temperature = 0.7f;
  r.params.top_k = 3;  // keeps 2.0, 1.0, 0.5 (ids 4, 0, 1)
  std::vector<double> e = Softmax(kSix, 0.7);
  const double mass = e[4] + e[0] + e[1];
  std::vector<double> want = {e[0] / mass, e[1] / mass, 0, 0, e[4] / mass, 0};
  EXPECT_LT(ChiSquare(kSix, r, want, 99), 13.82);  // 2 dof at p = 0.001
}

TEST(SamplerTest, TopPSamplingMatchesRenormalizedSoftmax) {
  Request r;
  r.params.temperature = 1.0f;
  std::vector<double> e = Softmax(kSix, 1.0);
  // Order: 4 (0.54), 0 (0.20), 1 (0.12), 2 (0.07)...: 0.8 needs ids 4, 0, 1.
  r.params.top_p = 0.8f;
  ASSERT_LT(e[4] + e[0], 0.8);
  ASSERT_GT(e[4] + e[0] + e[1], 0.8);
  const double mass = e[4] + e[0] + e[1];
  std::vector<double> want = {e[0] / mass, e[1] / mass, 0, 0, e[4] / mass, 0};
  EXPECT_LT(ChiSquare(kSix, r, want, 31337), 13.82);
}

TEST(SamplerTest, MinPSamplingMatchesRenormalizedSoftmax) {
  Request r;
  r.params.temperature = 1.0f;
  r.params.min_p = 0.2f;  // keeps p >= 0.2 * p(4): exp(l - 2) >= 0.2 <=> l >= 0.39
  std::vector<double> e = Softmax(kSix, 1.0);
  const double mass = e[4] + e[0] + e[1];
  std::vector<double> want = {e[0] / mass, e[1] / mass, 0, 0, e[4] / mass, 0};
  EXPECT_LT(ChiSquare(kSix, r, want, 4), 13.82);
}

TEST(SamplerTest, SampleFromProbsFollowsWeights) {
  const std::vector<float> w = {0.0f, 2.0f, 1.0f, 0.0f, 1.0f};
  SamplerState state(11);
  std::vector<int> counts(5, 0);
  for (int i = 0; i < 40000; ++i) ++counts[SampleFromProbs(w, state)];
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[3], 0);
  EXPECT_NEAR(counts[1] / 40000.0, 0.5, 0.02);
  EXPECT_NEAR(counts[2] / 40000.0, 0.25, 0.02);
  EXPECT_EQ(SampleFromProbs(std::vector<float>(3, 0.0f), state), -1);
}

TEST(SamplerTest, ComputeProbsIsTheSampledDistribution) {
  Request r;
  r.params.temperature = 0.0f;
  ExpectProbs(Probs({0.0f, 3.0f, 3.0f}, r), {0, 1, 0});
  r.params.temperature = 2.0f;
  r.params.top_k = 4;
  std::vector<float> probs = Probs(kSix, r);
  EXPECT_NEAR(std::accumulate(probs.begin(), probs.end(), 0.0), 1.0, 1e-6);
  EXPECT_EQ(probs[5], 0.0f);
  EXPECT_EQ(probs[3], 0.0f);
}

TEST(SamplerTest, ExponentialVariatesHaveUnitMean) {
  SamplerState state(3);
  double sum = 0;
  for (int i = 0; i < 100000; ++i) sum += state.NextExponential();
  EXPECT_NEAR(sum / 100000, 1.0, 0.02);
}

TEST(SamplerTest, OneShotWrapperMatchesSampler) {
  SamplingParams p;
  p.temperature = 0.8f;
  SamplerState a(5), b(5);
  std::vector<int32_t> prompt = {1}, output = {}, eos = {2};
  SampleResult one = SampleToken(kSix, p, prompt, output, a, eos);
  Sampler sampler;
  SampleResult two = sampler.Sample(kSix, SamplingInput{p, prompt, output, eos}, b);
  EXPECT_EQ(one.token, two.token);
}

}  // namespace
}  // namespace pagellm
