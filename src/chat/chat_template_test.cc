// ChatTemplate API tests, plus the C++ half of the conformance suite
// (tests/test_chat_templates.py): with PAGELLM_CHAT_CASES naming a JSON file of cases, the
// RenderCasesFromFile test renders each one and writes the outputs to PAGELLM_CHAT_RESULTS,
// where pytest compares them with Python jinja2's.
#include "chat/chat_template.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "chat/jinja_template.h"
#include "chat/python_json.h"

namespace pagellm {
namespace {

using OJson = nlohmann::ordered_json;

constexpr const char* kChatML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::string ApplyOrDie(const std::string& source, const OJson& messages, const OJson& options) {
  auto tmpl = ChatTemplate::Parse(source);
  EXPECT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  if (!tmpl.ok()) return "";
  auto out = tmpl->Apply(messages, options);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : "";
}

TEST(ChatTemplateTest, ChatMLWithGenerationPrompt) {
  OJson messages = OJson::parse(R"([{"role":"system","content":"Be brief."},
                                    {"role":"user","content":"Hi"}])");
  EXPECT_EQ(ApplyOrDie(kChatML, messages, {{"add_generation_prompt", true}}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, TextPartsAreJoinedWithNewlines) {
  OJson messages = OJson::parse(R"([{"role":"user","content":[
      {"type":"text","text":"one"},{"type":"image_url","image_url":{"url":"x"}},
      {"type":"text","text":"two"}]}])");
  EXPECT_EQ(ApplyOrDie(kChatML, messages, OJson::object()),
            "<|im_start|>user\none\ntwo<|im_end|>\n");
}

TEST(ChatTemplateTest, DetectsOpenAIContentFormat) {
  const std::string source =
      "{% for m in messages %}{% for part in m['content'] %}{% if part['type'] == 'text' %}"
      "{{ part['text'] }}{% else %}<img>{% endif %}{% endfor %}|{% endfor %}";
  auto tmpl = ChatTemplate::Parse(source);
  ASSERT_TRUE(tmpl.ok());
  EXPECT_EQ(tmpl->detected_content_format(), ChatContentFormat::kOpenAI);
  OJson messages = OJson::parse(R"([{"role":"user","content":"plain"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"image"}]}])");
  EXPECT_EQ(*tmpl->Apply(messages, OJson::object()), "plain|a<img>|");
  auto chatml = ChatTemplate::Parse(kChatML);
  ASSERT_TRUE(chatml.ok());
  EXPECT_EQ(chatml->detected_content_format(), ChatContentFormat::kString);
}

TEST(ChatTemplateTest, ToolCallArgumentsAreParsed) {
  const std::string source =
      "{% for m in messages %}{% for c in m.tool_calls %}{{ c.function.arguments | tojson }}"
      "{% endfor %}{% endfor %}";
  OJson messages = OJson::parse(R"([{"role":"assistant","content":null,"tool_calls":[
      {"id":"1","type":"function","function":{"name":"f","arguments":"{\"b\": 1, \"a\": [true]}"}}]}])");
  EXPECT_EQ(ApplyOrDie(source, messages, OJson::object()), R"({"b": 1, "a": [true]})");
}

TEST(ChatTemplateTest, ContinueFinalMessageCutsTrailingTemplateText) {
  OJson messages = OJson::parse(R"([{"role":"user","content":"Hi"},
                                    {"role":"assistant","content":"Hello, I am"}])");
  EXPECT_EQ(ApplyOrDie(kChatML, messages, {{"continue_final_message", true}}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello, I am");
  auto tmpl = ChatTemplate::Parse(kChatML);
  auto both = tmpl->Apply(messages,
                          OJson{{"continue_final_message", true}, {"add_generation_prompt", true}});
  EXPECT_FALSE(both.ok());
}

TEST(ChatTemplateTest, KwargsAndSpecialTokens) {
  const std::string source =
      "{{ bos_token }}{% if enable_thinking is defined and enable_thinking is false %}no-think"
      "{% endif %}{{ eos_token }}{{ tools is none }}";
  EXPECT_EQ(ApplyOrDie(source, OJson::array(),
                       {{"bos_token", "<s>"},
                        {"eos_token", {{"content", "</s>"}}},
                        {"chat_template_kwargs", {{"enable_thinking", false}}}}),
            "<s>no-think</s>True");
}

TEST(ChatTemplateTest, RaiseExceptionMessageIsReturnedVerbatim) {
  auto tmpl = ChatTemplate::Parse(
      "{% if messages[0]['role'] == 'system' %}"
      "{{ raise_exception('System role not supported') }}{% endif %}");
  ASSERT_TRUE(tmpl.ok());
  auto out = tmpl->Apply(OJson::parse(R"([{"role":"system","content":"x"}])"), OJson::object());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "System role not supported");
}

TEST(ChatTemplateTest, BadInputIsAnErrorNotACrash) {
  auto tmpl = ChatTemplate::Parse(kChatML);
  ASSERT_TRUE(tmpl.ok());
  EXPECT_FALSE(tmpl->Apply(OJson::parse(R"({"role":"user"})"), OJson::object()).ok());
  EXPECT_FALSE(tmpl->Apply(OJson::parse(R"([{"content":"x"}])"), OJson::object()).ok());
  EXPECT_FALSE(tmpl->Apply(OJson::parse(R"([{"role":"user","content":5}])"), OJson::object()).ok());
  // chat_template_kwargs may not replace the conversation itself.
  auto out = tmpl->Apply(OJson::parse(R"([{"role":"user","content":"x"}])"),
                         OJson{{"chat_template_kwargs", {{"messages", 1}}}});
  EXPECT_FALSE(out.ok());
  EXPECT_FALSE(ChatTemplate::Parse("{% for x in y %}").ok());
}

TEST(ChatTemplateTest, SourceFromTokenizerConfig) {
  nlohmann::json config = nlohmann::json::parse(R"({"chat_template":[
      {"name":"default","template":"D"},{"name":"tool_use","template":"T"}]})");
  EXPECT_EQ(*ChatTemplate::SourceFromTokenizerConfig(config, false), "D");
  EXPECT_EQ(*ChatTemplate::SourceFromTokenizerConfig(config, true), "T");
  EXPECT_FALSE(ChatTemplate::SourceFromTokenizerConfig(nlohmann::json::object(), false).ok());
}

// Renders every case of $PAGELLM_CHAT_CASES and writes {id, ok, output|error} records to
// $PAGELLM_CHAT_RESULTS. A case is either {"mode": "chat", template, messages, options} or
// {"mode": "raw", template, context}.
TEST(ChatTemplateConformance, RenderCasesFromFile) {
  const char* cases_path = std::getenv("PAGELLM_CHAT_CASES");
  const char* results_path = std::getenv("PAGELLM_CHAT_RESULTS");
  if (!cases_path || !results_path) GTEST_SKIP() << "PAGELLM_CHAT_CASES is not set";
  std::ifstream in(cases_path);
  ASSERT_TRUE(in) << cases_path;
  OJson cases = OJson::parse(in);
  OJson results = OJson::array();
  for (const OJson& c : cases) {
    OJson r = {{"id", c["id"]}};
    StatusOr<std::string> out = std::string();
    const std::string source = c["template"].get<std::string>();
    if (c.value("mode", "chat") == "raw") {
      auto tmpl = jinja::Template::Parse(source);
      auto ctx = jinja::ValueFromJson(c["context"]);
      if (!tmpl.ok()) {
        out = tmpl.status();
      } else if (!ctx.ok()) {
        out = ctx.status();
      } else {
        out = tmpl->Render(ctx->dict());
      }
    } else {
      auto tmpl = ChatTemplate::Parse(source);
      out = tmpl.ok() ? tmpl->Apply(c["messages"], c["options"])
                      : StatusOr<std::string>(tmpl.status());
    }
    r["ok"] = out.ok();
    if (out.ok()) {
      r["output"] = *out;
    } else {
      r["error"] = out.status().message();
    }
    results.push_back(std::move(r));
  }
  std::ofstream out(results_path);
  ASSERT_TRUE(out) << results_path;
  // Invalid UTF-8 cannot occur: every input came from JSON and outputs are built from it.
  out << results.dump(1, ' ', false, OJson::error_handler_t::replace);
}

}  // namespace
}  // namespace pagellm
