#include "grammar/regex_converter.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "grammar/grammar_test_util.h"

namespace pagellm {
namespace {

// Our regex grammar against std::regex (ECMAScript, whole match) on random ASCII strings.
TEST(RegexConverterTest, AgreesWithStdRegex) {
  const std::vector<std::string> patterns = {
      "abc",          "a|b|cd",        "(ab)*c",    "a+b?c*",       "[a-c]{2,3}",
      "[^abc]x",      "\\d{3}-\\d{2}", "\\w+@\\w+", "(a|bc){1,}d",  "x{0,2}y{2}",
      "a.c",          "(?:ab|a)b",     "[-a]+",     "\\s*\\S\\s*",  "(a*)*b",
      "[a-c\\d]+\\.", "((a|b)c){2}",   "a{2,}",     "\\x41\\u0042", "[^\\n]*"};
  std::mt19937 rng(7);
  const std::string alphabet = "abcdxy01-@. \n.AB";
  for (const std::string& p : patterns) {
    auto g = RegexToGrammar(p);
    ASSERT_TRUE(g.ok()) << p << ": " << g.status().ToString();
    const std::regex ref(p, std::regex::ECMAScript);
    for (int i = 0; i < 400; ++i) {
      const int len = static_cast<int>(rng() % 8);
      std::string s;
      for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
      EXPECT_EQ(GrammarMatches(*g, s), std::regex_match(s, ref)) << p << " on '" << s << "'";
    }
  }
}

TEST(RegexConverterTest, AnchorsAndLazyQuantifiers) {
  auto g = RegexToGrammar("^a+?b$");
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(GrammarMatches(*g, "aab"));
  EXPECT_FALSE(GrammarMatches(*g, "b"));
}

TEST(RegexConverterTest, UnsupportedIsAnError) {
  for (const char* bad : {"(a", "a)", "(?=a)", "(a)\\1", "\\bword", "a**+", "*a", "[a", "a^b",
                          "[z-a]", "(?i)a", "[[:alpha:]]"})
    EXPECT_FALSE(RegexToGrammar(bad).ok()) << bad;
}

TEST(RegexConverterTest, JsonStringContextEscapes) {
  Grammar g;
  const int32_t root = g.AddRule("root");
  auto s = AddRegex(g, "a[\"\\\\\n]b.", RegexContext::kJsonString, "re");
  ASSERT_TRUE(s.ok());
  g.AddAlternative(root, {*s});
  g.set_root(root);
  ASSERT_TRUE(g.Validate().ok());
  EXPECT_TRUE(GrammarMatches(g, "a\\\"bx"));
  EXPECT_TRUE(GrammarMatches(g, "a\\\\b\\t"));
  EXPECT_TRUE(GrammarMatches(g, "a\\nb\\u0001"));
  EXPECT_FALSE(GrammarMatches(g, "a\"bx"));
  EXPECT_FALSE(GrammarMatches(g, "a\nbx"));
}

}  // namespace
}  // namespace pagellm
