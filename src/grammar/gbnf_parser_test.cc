#include "grammar/gbnf_parser.h"

#include <gtest/gtest.h>

#include "grammar/grammar_test_util.h"

namespace pagellm {
namespace {

Grammar MustParse(std::string_view text) {
  auto g = ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? std::move(*g) : Grammar();
}

TEST(GbnfParserTest, ArithmeticGrammar) {
  const Grammar g = MustParse(R"gbnf(
    root ::= expr
    expr ::= term (("+" | "-") term)*
    term ::= factor (("*" | "/") factor)*
    factor ::= [0-9]+ | "(" expr ")"   # parenthesised
  )gbnf");
  for (const char* ok : {"1", "12+3", "(1+2)*3", "((4))", "1*2*3-4/5"})
    EXPECT_TRUE(GrammarMatches(g, ok)) << ok;
  for (const char* bad : {"", "+", "1+", "(1", "1)", "a", "1 + 2"})
    EXPECT_FALSE(GrammarMatches(g, bad)) << bad;
}

TEST(GbnfParserTest, RepetitionCounts) {
  const Grammar g = MustParse(R"(root ::= "a"{2,4} "b"{3} "c"{,1} "d"{1,})");
  EXPECT_TRUE(GrammarMatches(g, "aabbbd"));
  EXPECT_TRUE(GrammarMatches(g, "aaaabbbcddd"));
  EXPECT_FALSE(GrammarMatches(g, "abbbd"));
  EXPECT_FALSE(GrammarMatches(g, "aaaaabbbd"));
  EXPECT_FALSE(GrammarMatches(g, "aabbd"));
  EXPECT_FALSE(GrammarMatches(g, "aabbbccd"));
  EXPECT_FALSE(GrammarMatches(g, "aabbb"));
}

TEST(GbnfParserTest, ClassesEscapesAndUnicode) {
  const Grammar g = MustParse(R"(root ::= [^"\\\n] "\x41\u00e9\n" [α-ω] . "\"")");
  EXPECT_TRUE(GrammarMatches(g, "xAé\nβ☃\""));
  EXPECT_TRUE(GrammarMatches(g,
                             "\xF0\x9F\x98\x80"
                             "Aé\nω\x01\""));
  EXPECT_FALSE(GrammarMatches(g, "\"Aé\nβx\""));            // negated class excludes '"'
  EXPECT_FALSE(GrammarMatches(g, "xAé\nax\""));             // 'a' is not Greek
  EXPECT_FALSE(GrammarMatches(g, "xAé\nβ\xFF\""));          // '.' is a whole valid character
  EXPECT_FALSE(GrammarMatches(g, "xAé\nβ\xED\xA0\x80\""));  // no surrogates
}

TEST(GbnfParserTest, OptionalAndEmptyAlternatives) {
  const Grammar g = MustParse("root ::= \"x\"? ( | \"y\" ) item*\nitem ::= \"z\"");
  for (const char* ok : {"", "x", "y", "xy", "xyzz", "zzz"}) EXPECT_TRUE(GrammarMatches(g, ok));
  EXPECT_FALSE(GrammarMatches(g, "yx"));
}

TEST(GbnfParserTest, ErrorsSayWhere) {
  auto missing = ParseGbnf("root ::= foo");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'foo'"), std::string::npos);
  auto syntax = ParseGbnf("root ::= \"a\"\nx ::= [a-");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.status().message().find("line 2"), std::string::npos)
      << syntax.status().message();
  EXPECT_FALSE(ParseGbnf("x ::= \"a\"").ok());                     // no root
  EXPECT_FALSE(ParseGbnf("root ::= root \"a\" | \"b\"").ok());     // left recursion
  EXPECT_FALSE(ParseGbnf("root ::= \"(\" root \")\"").ok());       // never completes
  EXPECT_FALSE(ParseGbnf("root ::= \"a\"{100000000}").ok());       // too large
  EXPECT_FALSE(ParseGbnf("root ::= \"a\"\nroot ::= \"b\"").ok());  // defined twice
  EXPECT_FALSE(ParseGbnf("root ::= \"\\q\"").ok());                // unknown escape
  EXPECT_FALSE(ParseGbnf("").ok());
  std::string deep = "root ::= ";
  for (int i = 0; i < 500; ++i) deep += "(";
  EXPECT_FALSE(ParseGbnf(deep).ok());
}

}  // namespace
}  // namespace pagellm
