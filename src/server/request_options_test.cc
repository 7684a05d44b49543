// Unit tests of the server's pure helpers; the HTTP behaviour is tested end to end by
// tests/test_server_*.py against the real binary.
#include "server/request_options.h"

#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/http_util.h"

namespace pagellm {
namespace {

TEST(FanOut, IdsSeedsAndOrder) {
  RequestOptions o;
  o.params.n = 2;
  o.params.seed = 10;
  o.priority = 3;
  o.cache_salt = "salt";
  const auto reqs = FanOut("cmpl-x", {{1, 2}, {3}}, o);
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[0].request_id, "cmpl-x-0");
  EXPECT_EQ(reqs[3].request_id, "cmpl-x-3");
  EXPECT_EQ(reqs[1].prompt_token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(reqs[2].prompt_token_ids, (std::vector<int32_t>{3}));
  // Sample i of each prompt: seed + i; every engine request has n = 1.
  EXPECT_EQ(*reqs[0].params.seed, 10u);
  EXPECT_EQ(*reqs[1].params.seed, 11u);
  EXPECT_EQ(*reqs[2].params.seed, 10u);
  for (const auto& r : reqs) {
    EXPECT_EQ(r.params.n, 1);
    EXPECT_EQ(r.priority, 3);
    EXPECT_EQ(*r.cache_salt, "salt");
  }
  o.params.n = 1;
  o.params.seed.reset();
  const auto single = FanOut("cmpl-y", {{5}}, o);
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single[0].request_id, "cmpl-y");
  EXPECT_FALSE(single[0].params.seed.has_value());
}

TEST(TruncatePrompts, KeepsTheLastTokens) {
  RequestOptions o;
  std::vector<std::vector<int32_t>> prompts = {{1, 2, 3, 4}, {5}};
  TruncatePrompts(&prompts, o);
  EXPECT_EQ(prompts[0].size(), 4u);
  o.truncate_prompt_tokens = -1;  // keep everything
  TruncatePrompts(&prompts, o);
  EXPECT_EQ(prompts[0].size(), 4u);
  o.truncate_prompt_tokens = 2;
  TruncatePrompts(&prompts, o);
  EXPECT_EQ(prompts[0], (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(prompts[1], (std::vector<int32_t>{5}));
}

TEST(StopReasonJson, TokenIdsAreIntegersStringsStayStrings) {
  SamplingParams p;
  p.stop = {"42", "end"};
  EXPECT_TRUE(StopReasonJson("", p).is_null());
  EXPECT_EQ(StopReasonJson("128001", p), 128001);
  EXPECT_EQ(StopReasonJson("end", p), "end");
  EXPECT_EQ(StopReasonJson("42", p), "42");  // one of the request's stop strings
}

TEST(UsageJson, VllmShape) {
  EXPECT_EQ(DumpJson(UsageJson(5, 7, 2)),
            R"({"prompt_tokens":5,"total_tokens":12,"completion_tokens":7,)"
            R"("prompt_tokens_details":{"cached_tokens":2}})");
}

TEST(ApiError, ShapeAndStatusMapping) {
  EXPECT_EQ(ApiError::BadRequest("bad", "n").Body(),
            R"({"error":{"message":"bad","type":"BadRequestError","param":"n","code":400}})");
  EXPECT_EQ(ApiError::FromStatus(InvalidArgumentError("x")).status, 400);
  EXPECT_EQ(ApiError::FromStatus(NotFoundError("x")).status, 404);
  EXPECT_EQ(ApiError::FromStatus(UnavailableError("x")).status, 503);
  EXPECT_EQ(ApiError::FromStatus(ResourceExhaustedError("x")).status, 503);
  EXPECT_EQ(ApiError::FromStatus(UnauthenticatedError("x")).status, 401);
  EXPECT_EQ(ApiError::FromStatus(InternalError("x")).status, 500);
  // A client's invalid UTF-8 echoed in a message is replaced, not thrown on.
  EXPECT_NE(ApiError::BadRequest("bad \xff byte").Body().find("bad"), std::string::npos);
}

TEST(HttpUtil, ParsesOnlyJsonObjects) {
  EXPECT_TRUE(ParseJsonObject(R"({"a": 1})").ok());
  EXPECT_EQ(ParseJsonObject("[1]").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseJsonObject("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseJsonObject("{\"a\": ").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseJsonObject("{\"a\": 1e400}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseJsonObject("{\"a\": \"\xff\"}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseOrderedJsonObject(R"({"b": 1, "a": 2})")->begin().key(), "b");
  EXPECT_EQ(SseEvent(nlohmann::ordered_json{{"x", 1}}), "data: {\"x\":1}\n\n");
  EXPECT_EQ(Utf8Length("h\xc3\xa9llo \xe2\x82\xac"), 7u);
}

}  // namespace
}  // namespace pagellm
