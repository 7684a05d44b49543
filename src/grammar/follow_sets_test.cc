#include "grammar/follow_sets.h"

#include <gtest/gtest.h>

#include <string>

#include "grammar/gbnf_parser.h"

namespace pagellm {
namespace {

std::string Members(const ByteSet& s) {
  std::string out;
  for (int b = 0; b < 256; ++b)
    if (s.Contains(static_cast<uint8_t>(b))) out.push_back(static_cast<char>(b));
  return out;
}

// FOLLOW sets worked out by hand from the textbook definition.
TEST(FollowSetsTest, TextbookGrammar) {
  auto g = ParseGbnf(R"(
    root ::= a "x" | b
    a ::= "p" | ""
    b ::= a "y" c
    c ::= "z" d | ""
    d ::= "q"
  )");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const GrammarAutomaton automaton(*g);
  const std::vector<ByteSet> follow = ComputeFollowSets(automaton);
  ASSERT_EQ(follow.size(), static_cast<size_t>(g->num_rules()));
  EXPECT_EQ(Members(follow[g->FindRule("root")]), "");
  EXPECT_EQ(Members(follow[g->FindRule("a")]), "xy");
  // b ends the root; c ends b; d ends c: nothing follows any of them.
  EXPECT_EQ(Members(follow[g->FindRule("b")]), "");
  EXPECT_EQ(Members(follow[g->FindRule("c")]), "");
  EXPECT_EQ(Members(follow[g->FindRule("d")]), "");
}

TEST(FollowSetsTest, NullableChainsAndRecursion) {
  // list ::= item list | "" : what follows an item is an item's first byte or what follows
  // the list, through the nullable tail.
  auto g = ParseGbnf(R"gbnf(
    root ::= "[" list "]" e "!"
    list ::= item list | ""
    item ::= [a-b] | "(" list ")"
    e ::= f f
    f ::= "-" | ""
  )gbnf");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const GrammarAutomaton automaton(*g);
  const std::vector<ByteSet> follow = ComputeFollowSets(automaton);
  EXPECT_EQ(Members(follow[g->FindRule("list")]), ")]");
  EXPECT_EQ(Members(follow[g->FindRule("item")]), "()]ab");
  EXPECT_EQ(Members(follow[g->FindRule("e")]), "!");
  EXPECT_EQ(Members(follow[g->FindRule("f")]), "!-");
}

}  // namespace
}  // namespace pagellm
