// The reasoning parsers on outputs shaped as DeepSeek-R1's and Qwen3's (per vLLM's reasoning
// outputs docs), whole and streamed in chunks of several sizes.
#include "outparse/reasoning_parser.h"

#include <gtest/gtest.h>

namespace pagellm {
namespace {

struct Case {
  std::string parser;
  std::string text;
  std::optional<std::string> reasoning;
  std::string content;
};

TEST(ReasoningParser, WholeAndStreamed) {
  const std::vector<Case> cases = {
      // DeepSeek-R1: the template opened <think>; the output starts inside it.
      {"deepseek_r1", "9.11 vs 9.8: compare tenths.</think>\n\n9.8 is greater.",
       "9.11 vs 9.8: compare tenths.", "\n\n9.8 is greater."},
      {"deepseek_r1", "<think>\nStep 1.</think>Answer", "\nStep 1.", "Answer"},
      {"deepseek_r1", "still thinking when cut", "still thinking when cut", ""},
      {"deepseek_r1", "</think>{\"a\": 1}", "", "{\"a\": 1}"},
      // Qwen3: reasoning only when the output opens <think>.
      {"qwen3", "<think>\nThe user greets me.\n</think>\n\nHello!", "\nThe user greets me.\n",
       "\n\nHello!"},
      {"qwen3", "Hello! <think> is a tag.", std::nullopt, "Hello! <think> is a tag."},
      {"qwen3", "<think>unfinished", "unfinished", ""},
      {"qwen3", "<thi", std::nullopt, "<thi"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.parser + ": " + c.text);
    auto parser = ReasoningParser::Create(c.parser);
    ASSERT_TRUE(parser.ok());
    const ReasoningSplit whole = parser->Split(c.text, true);
    EXPECT_EQ(whole.reasoning, c.reasoning);
    EXPECT_EQ(whole.content, c.content);
    for (size_t chunk : {1, 2, 5, 1000}) {
      ReasoningStream stream(*parser);
      std::string reasoning, content;
      for (size_t i = 0; i < c.text.size(); i += chunk) {
        const ReasoningStream::Delta d = stream.Add(c.text.substr(i, chunk));
        reasoning += d.reasoning;
        content += d.content;
      }
      const ReasoningStream::Delta d = stream.Finish();
      reasoning += d.reasoning;
      content += d.content;
      EXPECT_EQ(reasoning, c.reasoning.value_or("")) << chunk;
      EXPECT_EQ(content, c.content) << chunk;
    }
  }
  EXPECT_FALSE(ReasoningParser::Create("granite").ok());
}

TEST(ReasoningParser, PartialHoldsBackMarkers) {
  auto parser = ReasoningParser::Create("deepseek_r1");
  ASSERT_TRUE(parser.ok());
  EXPECT_EQ(parser->Split("abc</thi", false).reasoning, "abc");
  EXPECT_EQ(parser->Split("abc</thi", true).reasoning, "abc</thi");
  EXPECT_TRUE(parser->starts_in_reasoning());
}

}  // namespace
}  // namespace pagellm
