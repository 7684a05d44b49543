// SamplingParams::Validate: vLLM's messages, field by field.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "pagellm/sampling_params.h"

namespace pagellm {
namespace {

constexpr int32_t kVocab = 1000;

std::string ErrorOf(const SamplingParams& p, int max_logprobs = 20) {
  Status s = p.Validate(kVocab, max_logprobs);
  if (s.ok()) return "OK";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  return s.message();
}

TEST(SamplingParamsValidate, DefaultsAreValid) {
  EXPECT_EQ(ErrorOf(SamplingParams{}), "OK");
}

TEST(SamplingParamsValidate, FloatRangesUseVllmWording) {
  SamplingParams p;
  p.temperature = -1.0f;
  EXPECT_EQ(ErrorOf(p), "temperature must be non-negative, got -1.0.");
  p.temperature = NAN;
  EXPECT_EQ(ErrorOf(p), "temperature must be non-negative, got nan.");
  p = SamplingParams{};
  p.top_p = 1.5f;
  EXPECT_EQ(ErrorOf(p), "top_p must be in (0, 1], got 1.5.");
  p.top_p = 0.0f;
  EXPECT_EQ(ErrorOf(p), "top_p must be in (0, 1], got 0.0.");
  p = SamplingParams{};
  p.min_p = -1e-5f;
  EXPECT_EQ(ErrorOf(p), "min_p must be in [0, 1], got -1e-05.");
  p = SamplingParams{};
  p.presence_penalty = 2.5f;
  EXPECT_EQ(ErrorOf(p), "presence_penalty must be in [-2, 2], got 2.5.");
  p = SamplingParams{};
  p.frequency_penalty = -123456.0f;
  EXPECT_EQ(ErrorOf(p), "frequency_penalty must be in [-2, 2], got -123456.0.");
  p = SamplingParams{};
  p.repetition_penalty = 0.0f;
  EXPECT_EQ(ErrorOf(p), "repetition_penalty must be greater than zero, got 0.0.");
  p.repetition_penalty = -1e20f;
  EXPECT_EQ(ErrorOf(p), "repetition_penalty must be greater than zero, got -1e+20.");
  p.repetition_penalty = -0.1f;
  EXPECT_EQ(ErrorOf(p), "repetition_penalty must be greater than zero, got -0.1.");
}

TEST(SamplingParamsValidate, BoundaryValuesAreAccepted) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.top_k = -1;
  EXPECT_EQ(ErrorOf(p), "OK");
  p.top_k = 1;
  EXPECT_EQ(ErrorOf(p), "OK");
}

TEST(SamplingParamsValidate, IntegerFields) {
  SamplingParams p;
  p.n = 0;
  EXPECT_EQ(ErrorOf(p), "n must be at least 1, got 0.");
  p = SamplingParams{};
  p.top_k = -2;
  EXPECT_EQ(ErrorOf(p), "top_k must be 0 (disable), or at least 1, got -2.");
  p = SamplingParams{};
  p.max_tokens = 0;
  EXPECT_EQ(ErrorOf(p), "max_tokens must be at least 1, got 0.");
  p = SamplingParams{};
  p.min_tokens = -1;
  EXPECT_EQ(ErrorOf(p), "min_tokens must be greater than or equal to 0, got -1.");
  p.min_tokens = 17;
  p.max_tokens = 16;
  EXPECT_EQ(ErrorOf(p), "min_tokens must be less than or equal to max_tokens=16, got 17.");
  p.max_tokens = std::nullopt;  // up to max_model_len: no upper bound here
  EXPECT_EQ(ErrorOf(p), "OK");
}

TEST(SamplingParamsValidate, Logprobs) {
  SamplingParams p;
  p.logprobs = -2;
  EXPECT_EQ(ErrorOf(p), "logprobs must be non-negative or -1, got -2.");
  p.logprobs = 20;
  EXPECT_EQ(ErrorOf(p), "OK");
  p.logprobs = 21;
  EXPECT_EQ(ErrorOf(p), "Requested sample logprobs of 21, which is greater than max allowed: 20");
  EXPECT_EQ(ErrorOf(p, 50), "OK");
  p.logprobs = -1;  // whole vocabulary
  EXPECT_EQ(ErrorOf(p), "Requested sample logprobs of 1000, which is greater than max allowed: 20");
  EXPECT_EQ(ErrorOf(p, -1), "OK");
  p = SamplingParams{};
  p.prompt_logprobs = -3;
  EXPECT_EQ(ErrorOf(p), "prompt_logprobs must be non-negative or -1, got -3.");
  p.prompt_logprobs = 30;
  EXPECT_EQ(ErrorOf(p), "Requested prompt logprobs of 30, which is greater than max allowed: 20");
}

TEST(SamplingParamsValidate, StopStringsAndTokenIds) {
  SamplingParams p;
  p.stop = {"a", ""};
  EXPECT_EQ(ErrorOf(p), "stop cannot contain an empty string.");
  p = SamplingParams{};
  p.stop_token_ids = {0, 999, 1000, -1};
  EXPECT_EQ(ErrorOf(p),
            "token_id(s) [1000, -1] in stop_token_ids contain out-of-vocab token ids. "
            "Vocabulary size: 1000");
}

TEST(SamplingParamsValidate, LogitBias) {
  SamplingParams p;
  p.logit_bias = {{5, 100.0f}, {6, -100.0f}};
  EXPECT_EQ(ErrorOf(p), "OK");
  p.logit_bias = {{5, 1.0f}, {1000, 1.0f}, {1234, 2.0f}};
  EXPECT_EQ(ErrorOf(p),
            "token_id(s) [1000, 1234] in logit_bias contain out-of-vocab token ids. "
            "Vocabulary size: 1000");
  p.logit_bias = {{5, 150.0f}};
  EXPECT_EQ(ErrorOf(p), "logit_bias value for token_id 5 must be in [-100, 100], got 150.0.");
}

}  // namespace
}  // namespace pagellm
