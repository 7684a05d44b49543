#include "spec/speculative_config_parser.h"

#include <gtest/gtest.h>

namespace pagellm {
namespace {

TEST(SpeculativeConfigParserTest, JsonDraftModel) {
  SpeculativeConfig c;
  ASSERT_TRUE(MergeSpeculativeConfigJson(
                  R"({"method": "draft_model", "model": "/m", "num_speculative_tokens": 5,
                      "max_model_len": 256})",
                  c)
                  .ok());
  ASSERT_TRUE(ResolveSpeculativeConfig(c).ok());
  EXPECT_EQ(c.method, SpeculativeMethod::kDraftModel);
  EXPECT_EQ(c.model, "/m");
  EXPECT_EQ(c.num_speculative_tokens, 5);
  EXPECT_EQ(c.max_model_len, 256);
  EXPECT_TRUE(c.enabled());
}

TEST(SpeculativeConfigParserTest, OldFlagsMeanDraftModel) {
  SpeculativeConfig c;
  c.model = "/draft";
  c.num_speculative_tokens = 3;
  ASSERT_TRUE(ResolveSpeculativeConfig(c).ok());
  EXPECT_EQ(c.method, SpeculativeMethod::kDraftModel);
}

TEST(SpeculativeConfigParserTest, NgramDefaultsAsVllm) {
  SpeculativeConfig c;
  ASSERT_TRUE(
      MergeSpeculativeConfigJson(R"({"method": "ngram", "num_speculative_tokens": 4})", c).ok());
  ASSERT_TRUE(ResolveSpeculativeConfig(c).ok());
  EXPECT_EQ(c.prompt_lookup_min, 5);
  EXPECT_EQ(c.prompt_lookup_max, 5);
  SpeculativeConfig d;
  ASSERT_TRUE(MergeSpeculativeConfigJson(
                  R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3})", d)
                  .ok());
  ASSERT_TRUE(ResolveSpeculativeConfig(d).ok());
  EXPECT_EQ(d.prompt_lookup_min, 3);
  EXPECT_EQ(d.prompt_lookup_max, 3);
}

TEST(SpeculativeConfigParserTest, DraftPolicy) {
  SpeculativeConfig c;
  EXPECT_EQ(c.draft_policy, "adaptive");
  ASSERT_TRUE(MergeSpeculativeConfigJson(
                  R"({"method": "ngram", "num_speculative_tokens": 4, "draft_policy": "fixed",
                      "draft_free_tokens": 12.5})",
                  c)
                  .ok());
  ASSERT_TRUE(ResolveSpeculativeConfig(c).ok());
  EXPECT_EQ(c.draft_policy, "fixed");
  EXPECT_DOUBLE_EQ(c.draft_free_tokens, 12.5);
  SpeculativeConfig bad = c;
  bad.draft_policy = "sometimes";
  EXPECT_FALSE(ResolveSpeculativeConfig(bad).ok());
  bad = c;
  bad.draft_free_tokens = 0.5;
  EXPECT_FALSE(ResolveSpeculativeConfig(bad).ok());
  EXPECT_FALSE(MergeSpeculativeConfigJson(R"({"draft_policy": 1})", c).ok());
}

TEST(SpeculativeConfigParserTest, NgramRule) {
  SpeculativeConfig c;
  EXPECT_EQ(c.ngram_rule, "vote");
  ASSERT_TRUE(
      MergeSpeculativeConfigJson(
          R"({"method": "ngram", "num_speculative_tokens": 4, "ngram_rule": "earliest"})", c)
          .ok());
  ASSERT_TRUE(ResolveSpeculativeConfig(c).ok());
  EXPECT_EQ(c.ngram_rule, "earliest");
  SpeculativeConfig bad = c;
  bad.ngram_rule = "latest";
  EXPECT_FALSE(ResolveSpeculativeConfig(bad).ok());
  EXPECT_FALSE(MergeSpeculativeConfigJson(R"({"ngram_rule": 2})", c).ok());
}

TEST(SpeculativeConfigParserTest, MethodNamesRoundTrip) {
  for (SpeculativeMethod m :
       {SpeculativeMethod::kNone, SpeculativeMethod::kDraftModel, SpeculativeMethod::kNgram}) {
    StatusOr<SpeculativeMethod> parsed = ParseSpeculativeMethod(SpeculativeMethodName(m));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, m);
  }
  EXPECT_FALSE(ParseSpeculativeMethod("eagle").ok());
  SpeculativeConfig c;
  ASSERT_TRUE(MergeSpeculativeConfigJson(R"({"method": null})", c).ok());
  EXPECT_EQ(c.method, SpeculativeMethod::kNone);
}

TEST(SpeculativeConfigParserTest, Errors) {
  SpeculativeConfig c;
  EXPECT_FALSE(MergeSpeculativeConfigJson("not json", c).ok());
  EXPECT_FALSE(MergeSpeculativeConfigJson(R"({"bogus": 1})", c).ok());
  EXPECT_FALSE(MergeSpeculativeConfigJson(R"({"num_speculative_tokens": "4"})", c).ok());
  auto resolve = [](SpeculativeConfig s) { return ResolveSpeculativeConfig(s); };
  SpeculativeConfig no_draft;
  no_draft.num_speculative_tokens = 4;
  EXPECT_FALSE(resolve(no_draft).ok());
  EXPECT_FALSE(
      MergeSpeculativeConfigJson(R"({"method": "eagle", "num_speculative_tokens": 4})", c).ok());
  SpeculativeConfig no_k;
  no_k.method = SpeculativeMethod::kNgram;
  EXPECT_FALSE(resolve(no_k).ok());
  SpeculativeConfig bad_lookup;
  bad_lookup.method = SpeculativeMethod::kNgram;
  bad_lookup.num_speculative_tokens = 2;
  bad_lookup.prompt_lookup_min = 4;
  bad_lookup.prompt_lookup_max = 2;
  EXPECT_FALSE(resolve(bad_lookup).ok());
  SpeculativeConfig off;
  EXPECT_TRUE(resolve(off).ok());
  EXPECT_FALSE(off.enabled());
}

}  // namespace
}  // namespace pagellm
