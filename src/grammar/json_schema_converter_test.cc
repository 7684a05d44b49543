#include "grammar/json_schema_converter.h"

#include <gtest/gtest.h>

#include "grammar/grammar_test_util.h"
#include "grammar/integer_range.h"

namespace pagellm {
namespace {

Grammar MustConvert(std::string_view schema, JsonGrammarOptions options = {}) {
  auto g = JsonSchemaToGrammar(schema, options);
  EXPECT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
  return g.ok() ? std::move(*g) : Grammar();
}

// Every integer in [-300, 300] against the arithmetic definition.
TEST(IntegerRangeTest, ExhaustiveSmallRanges) {
  const std::vector<std::pair<std::optional<int64_t>, std::optional<int64_t>>> ranges = {
      {0, 0},  {0, 9},    {1, 100}, {25, 312},  {-17, 42}, {-250, -3},
      {7, {}}, {{}, -12}, {{}, 99}, {-100, {}}, {{}, {}},  {10, 10}};
  for (const auto& [lo, hi] : ranges) {
    Grammar g;
    const int32_t root = g.AddRule("root");
    auto sym = IntegerRange(g, lo, hi, "r");
    ASSERT_TRUE(sym.ok());
    g.AddAlternative(root, {*sym});
    g.set_root(root);
    ASSERT_TRUE(g.Validate().ok());
    for (int64_t x = -300; x <= 300; ++x) {
      const bool in = (!lo || x >= *lo) && (!hi || x <= *hi);
      EXPECT_EQ(GrammarMatches(g, std::to_string(x)), in) << x;
    }
    EXPECT_FALSE(GrammarMatches(g, "-0"));
    EXPECT_FALSE(GrammarMatches(g, "007"));
  }
  Grammar g;
  EXPECT_FALSE(IntegerRange(g, 5, 4, "r").ok());
}

TEST(JsonSchemaConverterTest, ObjectWithRequiredAndOptional) {
  const Grammar g = MustConvert(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}},
      "required": ["name"]})");
  for (const char* ok :
       {R"({"name":"x"})", R"({"name": "x", "age": 3})", R"({"name":"","tags":["a","b"]})",
        R"( {"name":"\u00e9\n","age":0} )", "{\n  \"name\": \"q\"\n}"})
    EXPECT_TRUE(GrammarMatches(g, ok)) << ok;
  for (const char* bad :
       {R"({})", R"({"age":3})", R"({"age":3,"name":"x"})", R"({"name":"x","age":-1})",
        R"({"name":"x","tags":["a","b","a"]})", R"({"name":"x","other":1})", R"({"name":"x",})",
        R"({"name":"a"b"})", "{\"name\":\"\n\"}"})
    EXPECT_FALSE(GrammarMatches(g, bad)) << bad;
}

TEST(JsonSchemaConverterTest, RecursionThroughRef) {
  const Grammar g = MustConvert(R"({"$ref": "#/$defs/node", "$defs": {"node": {
      "type": "object", "properties": {"v": {"type": "integer"},
      "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}}})");
  EXPECT_TRUE(GrammarMatches(g, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"));
  EXPECT_FALSE(GrammarMatches(g, R"({"v":1,"kids":[{}]})"));
}

TEST(JsonSchemaConverterTest, StringsAndFormats) {
  const Grammar len = MustConvert(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(GrammarMatches(len, R"("ab")"));
  EXPECT_TRUE(GrammarMatches(len, R"("a\nb")"));  // an escape is one character
  EXPECT_FALSE(GrammarMatches(len, R"("a")"));
  EXPECT_FALSE(GrammarMatches(len, R"("abcd")"));
  const Grammar date = MustConvert(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(GrammarMatches(date, R"("2024-02-28")"));
  EXPECT_FALSE(GrammarMatches(date, R"("2024-02-30")"));
  EXPECT_FALSE(GrammarMatches(date, R"("2024-13-01")"));
  const Grammar uuid = MustConvert(R"({"format":"uuid","type":"string"})");
  EXPECT_TRUE(GrammarMatches(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  const Grammar pattern = MustConvert(R"({"type":"string","pattern":"^[a-z]+\\d$"})");
  EXPECT_TRUE(GrammarMatches(pattern, R"("abc1")"));
  EXPECT_FALSE(GrammarMatches(pattern, R"("abc")"));
}

TEST(JsonSchemaConverterTest, ArraysAndTuples) {
  const Grammar g = MustConvert(
      R"({"type":"array","prefixItems":[{"type":"boolean"},{"type":"null"}],"items":{"type":"integer"},"minItems":1,"maxItems":3})");
  for (const char* ok : {"[true]", "[false,null]", "[true, null, 5]"})
    EXPECT_TRUE(GrammarMatches(g, ok)) << ok;
  for (const char* bad : {"[]", "[null]", "[true,null,5,6]", "[true,5]"})
    EXPECT_FALSE(GrammarMatches(g, bad)) << bad;
}

TEST(JsonSchemaConverterTest, UnionsEnumsAndWhitespacePattern) {
  JsonGrammarOptions compact;
  compact.whitespace_pattern = "";
  const Grammar g = MustConvert(
      R"({"anyOf":[{"type":"integer","maximum":5},{"const":{"k":[1,"x"]}},{"enum":[null,"s"]}]})",
      compact);
  for (const char* ok : {"5", "-4", R"({"k":[1,"x"]})", "null", R"("s")"})
    EXPECT_TRUE(GrammarMatches(g, ok)) << ok;
  for (const char* bad : {"6", " 5", R"({"k": [1,"x"]})", R"("t")"})
    EXPECT_FALSE(GrammarMatches(g, bad)) << bad;
}

TEST(JsonSchemaConverterTest, AnyJsonObject) {
  auto g = JsonObjectGrammar();
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(GrammarMatches(*g, R"({"a": [1, 2.5e-3, {"b": null}], "c": true})"));
  EXPECT_TRUE(GrammarMatches(*g, "{}"));
  EXPECT_FALSE(GrammarMatches(*g, "[1]"));
  EXPECT_FALSE(GrammarMatches(*g, R"({"a": 01})"));
  EXPECT_FALSE(GrammarMatches(*g, R"({"a" 1})"));
}

TEST(JsonSchemaConverterTest, RefusesWhatItCannotExpress) {
  for (const char* bad :
       {"not json", R"({"type":"array","uniqueItems":true})", R"({"not":{"type":"null"}})",
        R"({"type":"object","properties":{"a":{"$ref":"#/nowhere"}}})", "false",
        R"({"type":"tuple"})", R"({"$ref":"#/$defs/a","$defs":{"a":{"type":"object",
           "properties":{"x":{"$ref":"#/$defs/a"}},"required":["x"]}}})",
        R"({"type":"integer","minimum":5,"maximum":1})",
        R"({"type":"number","exclusiveMinimum":0.1,"exclusiveMaximum":0.9})",
        R"({"type":"string","minLength":100000000})"}) {
    auto g = JsonSchemaToGrammar(bad);
    EXPECT_FALSE(g.ok()) << bad;
  }
  // Deep nesting is refused, not a crash.
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += R"({"type":"array","items":)";
  deep += "{}";
  for (int i = 0; i < 200; ++i) deep += "}";
  EXPECT_FALSE(JsonSchemaToGrammar(deep).ok());
}

}  // namespace
}  // namespace pagellm
