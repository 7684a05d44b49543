// libFuzzer target for the chat-template engine. Input starting with '[' is parsed as an
// OpenAI message list and rendered by a fixed tool-calling template (exercising message
// normalization, tojson and continue_final_message); any other input is itself a template,
// parsed and rendered against a small fixed context. Checked: no crash, no hang (the render
// limits are tightened so every input finishes quickly), no leak, and a successful render
// stays within its output limit.
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/jinja_template.h"
#include "chat/python_json.h"

namespace pagellm {
namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

jinja::RenderLimits FuzzLimits() {
  jinja::RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_steps = 200000;
  return limits;
}

const jinja::ValueDict& Context() {
  static const jinja::ValueDict* ctx = [] {
    auto json = nlohmann::ordered_json::parse(R"({
      "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi \u00e9 \ud83e\udd99"},
        {"role": "assistant", "content": null, "tool_calls": [
          {"id": "call00001", "type": "function",
           "function": {"name": "f", "arguments": {"x": [1, 2.5, null, true]}}}]},
        {"role": "tool", "content": "{\"ok\": 1}", "tool_call_id": "call00001"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
      "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
      "n": 3, "s": "  text  ", "l": [3, 1, 2], "d": {"a": 1}})");
    return new jinja::ValueDict(jinja::ValueFromJson(json)->dict());
  }();
  return *ctx;
}

const ChatTemplate& ToolTemplate() {
  static const ChatTemplate* tmpl = [] {
    auto t = ChatTemplate::Parse(
        "{%- if tools %}{{- tools | tojson(indent=2) }}{%- endif %}"
        "{%- for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}"
        "{%- for c in m.tool_calls %}{{ c.function.name }}({{ c.function.arguments | tojson }})"
        "{%- endfor %}{% if m.content is not string %}{% for p in m.content %}{{ p.text }}"
        "{% endfor %}{% endif %}{%- endfor %}"
        "{%- if add_generation_prompt %}<|assistant|>{% endif %}");
    Check(t.ok());
    auto* out = new ChatTemplate(std::move(*t));
    out->set_limits(FuzzLimits());
    return out;
  }();
  return *tmpl;
}

}  // namespace
}  // namespace pagellm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagellm;
  if (size > 1 << 16) return 0;
  const std::string input(reinterpret_cast<const char*>(data), size);
  if (!input.empty() && input[0] == '[') {
    auto messages = nlohmann::ordered_json::parse(input, nullptr, false);
    if (messages.is_discarded()) return 0;
    for (bool continue_final : {false, true}) {
      nlohmann::ordered_json options = {{"continue_final_message", continue_final},
                                        {"add_generation_prompt", !continue_final},
                                        {"tools", nlohmann::ordered_json::array()}};
      auto out = ToolTemplate().Apply(messages, options);
      if (out.ok()) Check(out->size() <= (1u << 20));
    }
    return 0;
  }
  auto tmpl = jinja::Template::Parse(input);
  if (!tmpl.ok()) return 0;
  auto out = tmpl->Render(Context(), FuzzLimits());
  if (out.ok()) Check(out->size() <= (1u << 20));
  return 0;
}
