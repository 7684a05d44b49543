#include "grammar/rule_inliner.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_test_util.h"
#include "grammar/json_schema_converter.h"

namespace pagellm {
namespace {

// Every string over `alphabet` of length <= max_len.
std::vector<std::string> AllStrings(const std::string& alphabet, int max_len) {
  std::vector<std::string> out = {""};
  for (size_t begin = 0, len = 0; len < static_cast<size_t>(max_len); ++len) {
    const size_t end = out.size();
    for (size_t i = begin; i < end; ++i)
      for (char c : alphabet) out.push_back(out[i] + c);
    begin = end;
  }
  return out;
}

void ExpectSameLanguage(const Grammar& a, const Grammar& b, const std::string& alphabet,
                        int max_len) {
  for (const std::string& s : AllStrings(alphabet, max_len))
    EXPECT_EQ(GrammarMatches(a, s), GrammarMatches(b, s)) << "'" << s << "'";
}

TEST(RuleInlinerTest, GbnfLanguageUnchanged) {
  const char* const kGrammars[] = {
      R"gbnf(root ::= "(" item ("," item)* ")"
             item ::= [0-9] | "x" | "")gbnf",
      R"gbnf(root ::= sign digit+ frac?
             sign ::= "-" | ""
             digit ::= [0-9]
             frac ::= "." digit digit?)gbnf",
      R"gbnf(root ::= ("ab" | c)+ "d"?
             c ::= "c" | "ca")gbnf",
  };
  for (const char* text : kGrammars) {
    auto g = ParseGbnf(text);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const Grammar inlined = InlineLeafRules(*g);
    EXPECT_TRUE(inlined.Validate().ok());
    EXPECT_LT(inlined.num_rules(), g->num_rules()) << text;
    ExpectSameLanguage(*g, inlined, "()0,x-.9abcd", 4);
  }
}

// The point of inlining: a JSON string's one-character rule is folded into the repetition, so
// no rule named after the character class survives and the language is the same.
TEST(RuleInlinerTest, JsonStringCharacterFoldedIntoRepetition) {
  auto g = JsonSchemaToGrammar(R"({"type": "string", "maxLength": 3})", JsonGrammarOptions{});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const Grammar inlined = InlineLeafRules(*g);
  for (int32_t r = 0; r < inlined.num_rules(); ++r)
    EXPECT_NE(inlined.rule_name(r).rfind("char", 0), 0u) << inlined.rule_name(r);
  ExpectSameLanguage(*g, inlined, "\"a\\u0\xc3\xa9", 5);
}

}  // namespace
}  // namespace pagellm
