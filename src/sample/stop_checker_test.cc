// StopChecker: stop tokens, stop strings across token boundaries, held-back streaming text,
// include_stop_str_in_output, min_tokens, max_tokens and ignore_eos.
#include "sample/stop_checker.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace pagellm {
namespace {

constexpr int32_t kEos = 2;
constexpr int32_t kWord = 10;  // any ordinary token

StopChecker MakeChecker(const SamplingParams& p, std::vector<int32_t> extra_eos = {}) {
  return StopChecker(p, kEos, extra_eos, StopChecker::OutputLimit(p, 10, 4096));
}

// Feeds (token, text) pairs and returns what was streamed after each.
std::vector<std::string> Feed(StopChecker& c,
                              const std::vector<std::pair<int32_t, std::string>>& tokens) {
  std::vector<std::string> out;
  for (const auto& [id, text] : tokens) out.push_back(c.Append(id, text));
  return out;
}

TEST(StopCheckerTest, EosStopsWithoutItsText) {
  SamplingParams p;
  StopChecker c = MakeChecker(p);
  EXPECT_EQ(c.Append(kWord, "Hi"), "Hi");
  EXPECT_FALSE(c.finished());
  EXPECT_EQ(c.Append(kEos, "</s>"), "");
  ASSERT_TRUE(c.finished());
  EXPECT_EQ(*c.finish_reason(), FinishReason::kStop);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(c.stop_reason()));
  EXPECT_EQ(c.text(), "Hi");
  EXPECT_STREQ(FinishReasonName(*c.finish_reason()), "stop");
}

TEST(StopCheckerTest, IgnoreEosKeepsGoingUntilLength) {
  SamplingParams p;
  p.ignore_eos = true;
  p.max_tokens = 3;
  StopChecker c = MakeChecker(p, {7});
  EXPECT_EQ(c.Append(kEos, "<e>"), "<e>");
  EXPECT_EQ(c.Append(7, "<x>"), "<x>");  // generation_config EOS ignored too
  EXPECT_FALSE(c.finished());
  EXPECT_EQ(c.Append(kWord, "a"), "a");
  ASSERT_TRUE(c.finished());
  EXPECT_EQ(*c.finish_reason(), FinishReason::kLength);
  EXPECT_STREQ(FinishReasonName(*c.finish_reason()), "length");
  EXPECT_TRUE(std::holds_alternative<std::monostate>(c.stop_reason()));
  EXPECT_EQ(c.text(), "<e><x>a");
}

TEST(StopCheckerTest, StopTokenIdsReportTheirId) {
  SamplingParams p;
  p.stop_token_ids = {42};
  StopChecker c = MakeChecker(p);
  Feed(c, {{kWord, "x"}, {42, "<stop>"}});
  ASSERT_TRUE(c.finished());
  EXPECT_EQ(std::get<int32_t>(c.stop_reason()), 42);
  EXPECT_EQ(c.text(), "x");
  // ignore_eos does not disable stop_token_ids.
  p.ignore_eos = true;
  StopChecker d = MakeChecker(p);
  d.Append(42, "");
  EXPECT_TRUE(d.finished());
}

TEST(StopCheckerTest, ExtraEosIdsBehaveLikeStopTokenIds) {
  SamplingParams p;
  StopChecker c = MakeChecker(p, {128009});
  c.Append(128009, "<|eot_id|>");
  ASSERT_TRUE(c.finished());
  EXPECT_EQ(std::get<int32_t>(c.stop_reason()), 128009);
  EXPECT_EQ(c.text(), "");
}

TEST(StopCheckerTest, IncludeStopStrKeepsStopTokenText) {
  SamplingParams p;
  p.stop_token_ids = {42};
  p.include_stop_str_in_output = true;
  StopChecker c = MakeChecker(p);
  EXPECT_EQ(Feed(c, {{kWord, "x"}, {42, "<stop>"}}), (std::vector<std::string>{"x", "<stop>"}));
  EXPECT_EQ(c.text(), "x<stop>");
}

TEST(StopCheckerTest, StopStringSplitAcrossTokensIsHeldBackAndRemoved) {
  SamplingParams p;
  p.stop = {"END"};
  StopChecker c = MakeChecker(p);
  EXPECT_EQ(c.Append(kWord, "foo E"), "foo ");  // "E" could start "END"
  EXPECT_EQ(c.held_back(), 1u);
  EXPECT_EQ(c.Append(kWord, "N"), "");
  EXPECT_EQ(c.held_back(), 2u);
  EXPECT_EQ(c.Append(kWord, "D bar"), "");
  ASSERT_TRUE(c.finished());
  EXPECT_EQ(*c.finish_reason(), FinishReason::kStop);
  EXPECT_EQ(std::get<std::string>(c.stop_reason()), "END");
  EXPECT_EQ(c.text(), "foo ");
}

TEST(StopCheckerTest, HeldBackTextIsReleasedWhenTheMatchFails) {
  SamplingParams p;
  p.stop = {"END"};
  StopChecker c = MakeChecker(p);
  EXPECT_EQ(c.Append(kWord, "foo EN"), "foo ");
  EXPECT_EQ(c.Append(kWord, "X E"), "ENX ");
  EXPECT_EQ(c.Append(kWord, "nd"), "End");
  EXPECT_FALSE(c.finished());
  EXPECT_EQ(c.text(), "foo ENX End");
}

TEST(StopCheckerTest, StreamedTextNeverContainsAPartialStopString) {
  SamplingParams p;
  p.stop = {"<|end|>", "STOP"};
  StopChecker c = MakeChecker(p);
  std::string streamed;
  for (const char* piece : {"a<", "|e", "nd", "S", "T", "|", "x", "<|end", "|> tail"}) {
    streamed += c.Append(kWord, piece);
  }
  ASSERT_TRUE(c.finished());
  EXPECT_EQ(streamed, "a<|endST|x");
  EXPECT_EQ(c.text(), streamed);
}

TEST(StopCheckerTest, LongestPartialMatchIsHeldBack) {
  SamplingParams p;
  p.stop = {"abc", "bcd"};
  StopChecker c = MakeChecker(p);
  EXPECT_EQ(c.Append(kWord, "xab"), "x");  // "ab" may become "abc"
  EXPECT_EQ(c.Append(kWord, "cd"), "");
  EXPECT_EQ(std::get<std::string>(c.stop_reason()), "abc");  // starts earlier than "bcd"
  EXPECT_EQ(c.text(), "x");
}

TEST(StopCheckerTest, IncludeStopStrInOutputKeepsTheStringAndDropsTheRest) {
  SamplingParams p;
  p.stop = {"END"};
  p.include_stop_str_in_output = true;
  StopChecker c = MakeChecker(p);
  // Nothing is held back: the stop string would be part of the output anyway.
  EXPECT_EQ(Feed(c, {{kWord, "foo E"}, {kWord, "N"}, {kWord, "D bar"}}),
            (std::vector<std::string>{"foo E", "N", "D"}));
  ASSERT_TRUE(c.finished());
  EXPECT_EQ(c.text(), "foo END");
  EXPECT_EQ(std::get<std::string>(c.stop_reason()), "END");
}

TEST(StopCheckerTest, StopStringInsideOneTokenTruncatesThatToken) {
  SamplingParams p;
  p.stop = {"\n\n"};
  StopChecker c = MakeChecker(p);
  EXPECT_EQ(c.Append(kWord, "Answer: 4\n\nQuestion"), "Answer: 4");
  ASSERT_TRUE(c.finished());
  EXPECT_EQ(c.text(), "Answer: 4");
}

TEST(StopCheckerTest, EarliestStopStringWins) {
  SamplingParams p;
  p.stop = {"b", "a"};
  StopChecker c = MakeChecker(p);
  c.Append(kWord, "xab");
  ASSERT_TRUE(c.finished());
  EXPECT_EQ(std::get<std::string>(c.stop_reason()), "a");
  EXPECT_EQ(c.text(), "x");
}

TEST(StopCheckerTest, MaxTokensFinishesWithLengthAndFlushesHeldText) {
  SamplingParams p;
  p.max_tokens = 2;
  p.stop = {"END"};
  StopChecker c = MakeChecker(p);
  EXPECT_EQ(c.Append(kWord, "a"), "a");
  EXPECT_EQ(c.Append(kWord, "EN"), "EN");  // finished: nothing is held back any more
  ASSERT_TRUE(c.finished());
  EXPECT_EQ(*c.finish_reason(), FinishReason::kLength);
  EXPECT_EQ(c.held_back(), 0u);
}

TEST(StopCheckerTest, StopOnTheLastAllowedTokenIsStop) {
  SamplingParams p;
  p.max_tokens = 2;
  StopChecker c = MakeChecker(p);
  c.Append(kWord, "a");
  c.Append(kEos, "");
  EXPECT_EQ(*c.finish_reason(), FinishReason::kStop);
  SamplingParams q;
  q.max_tokens = 1;
  q.stop = {"a"};
  StopChecker d = MakeChecker(q);
  d.Append(kWord, "a");
  EXPECT_EQ(*d.finish_reason(), FinishReason::kStop);
  EXPECT_EQ(d.text(), "");
}

TEST(StopCheckerTest, OutputLimitCapsAtMaxModelLen) {
  SamplingParams p;
  p.max_tokens = 100;
  EXPECT_EQ(StopChecker::OutputLimit(p, 10, 4096), 100);
  EXPECT_EQ(StopChecker::OutputLimit(p, 4000, 4096), 96);
  p.max_tokens = std::nullopt;
  EXPECT_EQ(StopChecker::OutputLimit(p, 10, 4096), 4086);
  StopChecker c(p, kEos, {}, StopChecker::OutputLimit(p, 4094, 4096));
  c.Append(kWord, "a");
  c.Append(kWord, "b");
  EXPECT_EQ(*c.finish_reason(), FinishReason::kLength);
}

TEST(StopCheckerTest, MinTokensSuppressesStopTokensAndStopStrings) {
  SamplingParams p;
  p.min_tokens = 3;
  p.stop = {"STOP"};
  StopChecker c = MakeChecker(p);
  c.Append(kWord, "STOP");  // stop string within the first min_tokens: not checked
  EXPECT_FALSE(c.finished());
  c.Append(kEos, "<e>");  // EOS before min_tokens: an ordinary token (sampling masks it)
  EXPECT_FALSE(c.finished());
  c.Append(kWord, "x");  // third token: min_tokens reached, but no stop condition
  EXPECT_FALSE(c.finished());
  c.Append(kEos, "<e>");
  ASSERT_TRUE(c.finished());
  EXPECT_EQ(c.text(), "STOP<e>x");
}

TEST(StopCheckerTest, StopStringEndingAfterMinTokensMatchesAcrossTheBoundary) {
  SamplingParams p;
  p.min_tokens = 1;
  p.stop = {"END"};
  StopChecker c = MakeChecker(p);
  EXPECT_EQ(c.Append(kWord, "xEN"), "x");  // token 1 (== min_tokens): held back, not checked
  EXPECT_FALSE(c.finished());
  EXPECT_EQ(c.Append(kWord, "D"), "");  // token 2 completes "END", which started earlier
  ASSERT_TRUE(c.finished());
  EXPECT_EQ(c.text(), "x");
}

TEST(StopCheckerTest, EosAtMinTokensStops) {
  SamplingParams p;
  p.min_tokens = 2;
  StopChecker c = MakeChecker(p);
  c.Append(kWord, "a");
  c.Append(kEos, "");
  EXPECT_TRUE(c.finished());
  EXPECT_EQ(c.num_tokens(), 2);
}

TEST(StopCheckerTest, IncludedStopTokenTextCanCompleteAStopString) {
  SamplingParams p;
  p.stop_token_ids = {42};
  p.stop = {"]]"};
  p.include_stop_str_in_output = true;
  StopChecker c = MakeChecker(p);
  c.Append(kWord, "[x]");
  c.Append(42, "]!");
  ASSERT_TRUE(c.finished());
  EXPECT_EQ(std::get<std::string>(c.stop_reason()), "]]");
  EXPECT_EQ(c.text(), "[x]]");
}

}  // namespace
}  // namespace pagellm
