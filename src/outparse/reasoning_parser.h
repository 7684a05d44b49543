// Reasoning parsers (vLLM's --reasoning-parser): split a model's <think>...</think> reasoning
// from its answer.
//   deepseek_r1  the output starts inside the reasoning (DeepSeek-R1's template opens <think>
//                in the prompt; a leading <think> in the output is dropped); without </think>
//                all of it is reasoning
//   qwen3        reasoning only when the output starts with <think>; otherwise all content
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pagellm/status.h"

namespace pagellm {

struct ReasoningSplit {
  std::optional<std::string> reasoning;  // none: the output has no reasoning part
  std::string content;                   // the text after the reasoning
};

class ReasoningParser {
 public:
  static constexpr std::string_view kStart = "<think>";
  static constexpr std::string_view kEnd = "</think>";

  // deepseek_r1 or qwen3; another name is InvalidArgument listing them.
  static StatusOr<ReasoningParser> Create(std::string_view name);
  static const std::vector<std::string>& Names();

  // `text` is the whole output so far; `final`: it is all of it. A partial split holds back
  // text that may be the start of a marker, so that it is a prefix of every later split.
  ReasoningSplit Split(std::string_view text, bool final) const;
  // Whether the output begins inside the reasoning without a <think> of its own.
  bool starts_in_reasoning() const { return starts_in_reasoning_; }

 private:
  explicit ReasoningParser(bool starts_in_reasoning) : starts_in_reasoning_(starts_in_reasoning) {}
  bool starts_in_reasoning_;
};

// Streams a split: the new reasoning and content text of each step.
class ReasoningStream {
 public:
  explicit ReasoningStream(const ReasoningParser& parser) : parser_(parser) {}
  struct Delta {
    std::string reasoning;
    std::string content;
  };
  Delta Add(std::string_view text);
  Delta Finish();

 private:
  Delta Diff(const ReasoningSplit& split);
  const ReasoningParser& parser_;
  std::string text_;
  size_t reasoning_sent_ = 0;
  size_t content_sent_ = 0;
};

}  // namespace pagellm
