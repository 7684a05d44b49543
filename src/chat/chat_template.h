// ChatTemplate: renders an OpenAI-style conversation into a prompt with a Hugging Face chat
// template, the way vLLM does it (vLLM's message normalization, then transformers'
// apply_chat_template with tokenize=False). The output equals Python jinja2's for the same
// template and context.
//
// Options (all optional), as in a vLLM chat request:
//   add_generation_prompt   bool
//   continue_final_message  bool   render, then cut the prompt right after the final
//                                  message's text so generation continues it
//   tools, documents        passed to the template (None when absent)
//   chat_template_kwargs    object merged into the template variables (enable_thinking, ...)
//   bos_token, eos_token, unk_token, pad_token   strings (from the tokenizer config)
//   content_format          "auto" (default), "string" or "openai"
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja_template.h"
#include "pagellm/status.h"

namespace pagellm {

// How message content reaches the template (vLLM's chat_template_content_format): "string"
// flattens text parts into one string joined by "\n"; "openai" passes a list of parts.
enum class ChatContentFormat { kString, kOpenAI };

class ChatTemplate {
 public:
  static StatusOr<ChatTemplate> Parse(std::string source);

  // Picks the chat template out of a tokenizer_config.json: `chat_template` is a string or a
  // list of {name, template}; with named templates, "tool_use" is preferred when the request
  // has tools and "default" otherwise (transformers' rule).
  static StatusOr<std::string> SourceFromTokenizerConfig(const nlohmann::json& config,
                                                         bool has_tools);

  // Renders `messages` (an array of {role, content, ...}). Key order of objects is kept,
  // which matters for tojson output: parse requests into ordered_json to match vLLM.
  StatusOr<std::string> Apply(const nlohmann::ordered_json& messages,
                              const nlohmann::ordered_json& options) const;
  StatusOr<std::string> Apply(const nlohmann::json& messages, const nlohmann::json& options) const;

  // The content format vLLM would detect for this template: "openai" when it loops over a
  // message's content, else "string".
  ChatContentFormat detected_content_format() const { return content_format_; }
  const std::string& source() const { return *source_; }

  // Resource limits for rendering (defaults suit any real conversation).
  void set_limits(const jinja::RenderLimits& limits) { limits_ = limits; }

 private:
  ChatTemplate(std::shared_ptr<const std::string> source, jinja::Template tmpl,
               ChatContentFormat format)
      : source_(std::move(source)), template_(std::move(tmpl)), content_format_(format) {}

  std::shared_ptr<const std::string> source_;
  jinja::Template template_;
  ChatContentFormat content_format_;
  jinja::RenderLimits limits_;
};

}  // namespace pagellm
