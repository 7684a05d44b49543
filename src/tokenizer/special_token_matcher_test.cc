#include "tokenizer/special_token_matcher.h"

#include <gtest/gtest.h>

namespace pagellm {
namespace {

std::string Show(const std::vector<SpecialTokenMatcher::Segment>& segments) {
  std::string s;
  for (const auto& seg : segments) {
    if (seg.id >= 0) {
      s.push_back('[');
      s += std::to_string(seg.id);
      s.push_back(']');
    } else {
      s.push_back('\'');
      s += seg.text;
      s.push_back('\'');
    }
  }
  return s;
}

TEST(SpecialTokenMatcher, LeftmostLongestMatch) {
  SpecialTokenMatcher m;
  m.Add("<|a|>", 1, true);
  m.Add("<|a|><|b|>", 2, true);
  m.Add("<|", 3, true);
  m.Add("<think>", 4, false);
  EXPECT_EQ(Show(m.Split("x<|a|><|b|>y", true)), "'x'[2]'y'");
  EXPECT_EQ(Show(m.Split("<|a|><|c", true)), "[1][3]'c'");
  EXPECT_EQ(Show(m.Split("<<|a|", true)), "'<'[3]'a|'");
  EXPECT_EQ(Show(m.Split("", true)), "");
  EXPECT_EQ(Show(m.Split("plain", true)), "'plain'");
}

TEST(SpecialTokenMatcher, NonSpecialTokensAlwaysMatch) {
  SpecialTokenMatcher m;
  m.Add("<s>", 1, true);
  m.Add("<think>", 4, false);
  EXPECT_EQ(Show(m.Split("<s>a<think>b", false)), "'<s>a'[4]'b'");
  EXPECT_EQ(Show(m.Split("<s>a<think>b", true)), "[1]'a'[4]'b'");
  m.Add("<s>", 7, false);  // re-adding replaces
  EXPECT_EQ(Show(m.Split("<s>", false)), "[7]");
}

TEST(SpecialTokenMatcher, SpecialPrefixOfNonSpecial) {
  SpecialTokenMatcher m;
  m.Add("<a>", 1, true);
  m.Add("<a>b", 2, false);
  EXPECT_EQ(Show(m.Split("<a>b<a>c", false)), "[2]'<a>c'");
  EXPECT_EQ(Show(m.Split("<a>b<a>c", true)), "[2][1]'c'");
}

}  // namespace
}  // namespace pagellm
