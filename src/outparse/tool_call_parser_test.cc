// Each parser against model outputs written from its format's public documentation (Qwen's
// function-calling guide for hermes, Meta's Llama 3.1 prompt format, Mistral's function-calling
// docs, vLLM's pythonic tool-calling docs); arguments are expected as Python's json.dumps
// writes them. Every output is also streamed in chunks of several sizes: the deltas must add
// up to the whole-text parse.
#include "outparse/tool_call_parser.h"

#include <map>
#include <random>

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "outparse/json_prefix.h"
#include "outparse/tool_call_stream.h"

namespace pagellm {
namespace {

struct Call {
  std::string name;
  std::string arguments;
  bool operator==(const Call&) const = default;
};

struct Case {
  std::string parser;
  std::string text;
  std::string content;
  std::vector<Call> calls;
};

std::ostream& operator<<(std::ostream& os, const Call& c) {
  return os << c.name << "(" << c.arguments << ")";
}

std::vector<Call> Calls(const ToolParse& p) {
  std::vector<Call> out;
  for (const ParsedToolCall& c : p.calls) {
    EXPECT_TRUE(c.complete);
    out.push_back({c.name, c.arguments});
  }
  return out;
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      // Qwen2.5 function calling guide (Hermes-style template): two parallel calls.
      {"hermes",
       "<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": "
       "\"San Francisco, CA, USA\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
       "\"get_temperature_date\", \"arguments\": {\"location\": \"San Francisco, CA, USA\", "
       "\"date\": \"2024-10-01\"}}\n</tool_call>",
       "",
       {{"get_current_temperature", "{\"location\": \"San Francisco, CA, USA\"}"},
        {"get_temperature_date",
         "{\"location\": \"San Francisco, CA, USA\", \"date\": \"2024-10-01\"}"}}},
      // Content before the call; compact JSON, a nested object, numbers, an escape.
      {"hermes",
       "Let me look that up.\n<tool_call>{\"name\":\"search\",\"arguments\":{\"q\":\"caf\\u00e9 "
       "\\\"x\\\"\",\"opts\":{\"n\":3,\"w\":1.5e1,\"on\":true,\"tags\":[\"a\",null]}}}</tool_call>",
       "Let me look that up.\n",
       {{"search",
         "{\"q\": \"caf\xc3\xa9 \\\"x\\\"\", \"opts\": {\"n\": 3, \"w\": 15.0, \"on\": true, "
         "\"tags\": [\"a\", null]}}"}}},
      // No call: all content.
      {"hermes", "The weather is nice <tool today.", "The weather is nice <tool today.", {}},
      // Malformed call JSON: vLLM falls back to the whole text as content.
      {"hermes",
       "<tool_call>{\"name\": \"f\", \"arguments\": {]}</tool_call>",
       "<tool_call>{\"name\": \"f\", \"arguments\": {]}</tool_call>",
       {}},
      // Llama 3.1 prompt format, JSON-based tool calling.
      {"llama3_json",
       "{\"name\": \"get_current_conditions\", \"parameters\": {\"location\": \"San Francisco, "
       "CA\", \"unit\": \"Fahrenheit\"}}",
       "",
       {{"get_current_conditions",
         "{\"location\": \"San Francisco, CA\", \"unit\": \"Fahrenheit\"}"}}},
      // After <|python_tag|>, two calls separated by ";".
      {"llama3_json",
       "<|python_tag|>{\"name\": \"a\", \"arguments\": {\"x\": 1}}; {\"name\": \"b\", "
       "\"parameters\": {}}",
       "",
       {{"a", "{\"x\": 1}"}, {"b", "{}"}}},
      {"llama3_json", "Paris is the capital of France.", "Paris is the capital of France.", {}},
      // Mistral function calling docs (tokenizer v3).
      {"mistral",
       "[TOOL_CALLS] [{\"name\": \"retrieve_payment_status\", \"arguments\": {\"transaction_id\": "
       "\"T1001\"}}]",
       "",
       {{"retrieve_payment_status", "{\"transaction_id\": \"T1001\"}"}}},
      // Tokenizer v11: name[ARGS]{...} per call.
      {"mistral",
       "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{}",
       "Sure.",
       {{"get_weather", "{\"city\": \"Paris\"}"}, {"get_time", "{}"}}},
      {"mistral", "No tools needed [TOOL", "No tools needed [TOOL", {}},
      // vLLM's pythonic tool-calling docs.
      {"pythonic",
       "[get_weather(city='San Francisco', metric='celsius'), get_weather(city='Seattle', "
       "metric='celsius')]",
       "",
       {{"get_weather", "{\"city\": \"San Francisco\", \"metric\": \"celsius\"}"},
        {"get_weather", "{\"city\": \"Seattle\", \"metric\": \"celsius\"}"}}},
      // Literals of every kind, a dotted name, a call without arguments, Llama 4's tags.
      {"pythonic",
       "<|python_start|>[mod.f(a=1, b=-2.5, c=True, d=None, e=[1, (2, 3)], g={'k': \"v\\n\"}), "
       "g()]<|python_end|>",
       "",
       {{"mod.f",
         "{\"a\": 1, \"b\": -2.5, \"c\": true, \"d\": null, \"e\": [1, [2, 3]], \"g\": {\"k\": "
         "\"v\\n\"}}"},
        {"g", "{}"}}},
      {"pythonic", "[1, 2, 3] are numbers", "[1, 2, 3] are numbers", {}},
  };
  return cases;
}

// Streams `text` in chunks of `chunk` bytes; returns the summed content and calls.
ToolParse Stream(const ToolCallParser& parser, const std::string& text, size_t chunk,
                 std::vector<std::string>* ids) {
  ToolCallStream stream(parser);
  ToolParse out;
  auto apply = [&](const ToolStreamDelta& d) {
    out.content += d.content;
    for (const ToolCallDelta& c : d.calls) {
      if (!c.id.empty()) {
        // The first delta of a call names it; the index is the next one.
        EXPECT_EQ(c.index, static_cast<int>(out.calls.size()));
        EXPECT_FALSE(c.name.empty());
        out.calls.push_back({c.name, "", true});
        ids->push_back(c.id);
      }
      ASSERT_LT(c.index, static_cast<int>(out.calls.size()));
      out.calls[c.index].arguments += c.arguments;
    }
  };
  for (size_t i = 0; i < text.size(); i += chunk) apply(stream.Add(text.substr(i, chunk)));
  apply(stream.Finish());
  return out;
}

TEST(ToolCallParser, CannedOutputsWholeAndStreamed) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.parser + ": " + c.text);
    auto parser = CreateToolCallParser(c.parser);
    ASSERT_TRUE(parser.ok());
    const ToolParse whole = (*parser)->Parse(c.text, true);
    EXPECT_EQ(whole.content, c.content);
    EXPECT_EQ(Calls(whole), c.calls);
    for (size_t chunk : {1, 2, 3, 7, 1000}) {
      SCOPED_TRACE(chunk);
      std::vector<std::string> ids;
      const ToolParse streamed = Stream(**parser, c.text, chunk, &ids);
      // A malformed call may have been streamed before the text proved it malformed; the
      // canned well-formed outputs must stream exactly.
      if (!c.calls.empty() || c.content.find_first_of("[<{") == std::string::npos) {
        EXPECT_EQ(streamed.content, c.content);
        EXPECT_EQ(Calls(streamed), c.calls);
      }
      for (const std::string& id : ids) {
        if (c.parser == "mistral") {
          EXPECT_EQ(id.size(), 9u);
          for (char ch : id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)));
        } else {
          EXPECT_EQ(id.rfind("chatcmpl-tool-", 0), 0u) << id;
          EXPECT_EQ(id.size(), std::string("chatcmpl-tool-").size() + 32);
        }
      }
    }
  }
}

TEST(ToolCallParser, PartialParsesAreCertain) {
  auto parser = CreateToolCallParser("hermes");
  ASSERT_TRUE(parser.ok());
  // A possible start of <tool_call> is held back; the name is reported only once whole.
  EXPECT_EQ((*parser)->Parse("Hi <tool_c", false).content, "Hi ");
  EXPECT_EQ((*parser)->Parse("Hi <tool_c", true).content, "Hi <tool_c");
  EXPECT_TRUE((*parser)->Parse("<tool_call>{\"name\": \"get_w", false).calls.empty());
  const ToolParse p =
      (*parser)->Parse("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 12", false);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "f");
  EXPECT_EQ(p.calls[0].arguments, "{\"a\": ");
  EXPECT_FALSE(p.calls[0].complete);
}

// Cut, spliced and character-flipped variants of the canned outputs (model text is UTF-8),
// and deep nesting: never a crash, and whatever a final parse returns is well formed (calls whose
// arguments are JSON objects' text, or the whole text as content).
TEST(ToolCallParser, MangledOutputsStayWellFormed) {
  std::mt19937 rng(7);
  std::vector<std::string> inputs = {std::string(100000, '['), std::string(100000, '{'),
                                     "<tool_call>" + std::string(50000, '['),
                                     "[f(a=" + std::string(50000, '[') + ")]"};
  for (const Case& c : Cases()) {
    const std::string& t = c.text;
    for (int k = 0; k < 40; ++k) {
      std::string m = t;
      const size_t a = rng() % (t.size() + 1), b = rng() % (t.size() + 1);
      switch (k % 4) {
        case 0:
          m = t.substr(0, a);
          break;
        case 1:
          m = t.substr(0, std::min(a, b)) + t.substr(std::max(a, b));
          break;
        case 2:
          if (!m.empty()) m[a % m.size()] = static_cast<char>(32 + rng() % 95);
          break;
        case 3:
          m = t.substr(0, a) + t.substr(b / 2);
          break;
      }
      inputs.push_back(std::move(m));
    }
  }
  for (const std::string& name : ToolCallParserNames()) {
    auto parser = CreateToolCallParser(name);
    ASSERT_TRUE(parser.ok());
    for (const std::string& in : inputs) {
      // (Streaming re-reads the text at each step: only the short inputs.)
      std::vector<std::string> ids;
      if (in.size() < 10000) Stream(**parser, in, 5, &ids);
      const ToolParse p = (*parser)->Parse(in, true);
      if (p.calls.empty()) {
        EXPECT_EQ(p.content, in);
        continue;
      }
      for (const ParsedToolCall& call : p.calls) {
        EXPECT_TRUE(call.complete);
        EXPECT_FALSE(call.name.empty());
        const auto args = nlohmann::json::parse(call.arguments, nullptr, false);
        EXPECT_FALSE(args.is_discarded()) << name << ": " << call.arguments;
      }
    }
  }
}

TEST(ToolCallParser, UnknownName) {
  auto parser = CreateToolCallParser("nope");
  ASSERT_FALSE(parser.ok());
  EXPECT_NE(parser.status().message().find("hermes"), std::string::npos);
}

TEST(JsonPrefix, EveryPrefixIsAPrefixOfTheWhole) {
  const std::string raw =
      "{ \"a\" :[1,-2.50e1 , true,false,null,\"x\\ty\\u00e9\\ud83d\\ude00\"],\"b\":{}, \"c\":"
      "\"\\u0001\\/\"}";
  const JsonPrefix whole = CanonicalJsonPrefix(raw);
  ASSERT_TRUE(whole.complete);
  EXPECT_EQ(whole.text,
            "{\"a\": [1, -25.0, true, false, null, \"x\\ty\xc3\xa9\xf0\x9f\x98\x80\"], \"b\": {}, "
            "\"c\": \"\\u0001/\"}");
  EXPECT_EQ(whole.end, raw.size());
  for (size_t n = 0; n < raw.size(); ++n) {
    const JsonPrefix p = CanonicalJsonPrefix(std::string_view(raw).substr(0, n));
    EXPECT_FALSE(p.error) << n;
    EXPECT_FALSE(p.complete) << n;
    EXPECT_EQ(whole.text.substr(0, p.text.size()), p.text) << n;
  }
  EXPECT_TRUE(CanonicalJsonPrefix("{\"a\" 1}").error);
  EXPECT_TRUE(CanonicalJsonPrefix("[tru]").error);
  EXPECT_TRUE(CanonicalJsonPrefix("\"\\ud800x\"").error);
}

}  // namespace
}  // namespace pagellm
