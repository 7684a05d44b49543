#include "outparse/reasoning_parser.h"

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "outparse/tool_call_parser.h"

namespace pagellm {

const std::vector<std::string>& ReasoningParser::Names() {
  static const std::vector<std::string> names = {"deepseek_r1", "qwen3"};
  return names;
}

StatusOr<ReasoningParser> ReasoningParser::Create(std::string_view name) {
  if (name == "deepseek_r1") return ReasoningParser(true);
  if (name == "qwen3") return ReasoningParser(false);
  return InvalidArgumentError(fmt::format("invalid reasoning parser: {} (chose from {{ {} }})",
                                          name, fmt::join(Names(), ",")));
}

ReasoningSplit ReasoningParser::Split(std::string_view text, bool final) const {
  ReasoningSplit s;
  // A partial text that may still become <think> is held back whole.
  if (!final && text.size() < kStart.size() && kStart.substr(0, text.size()) == text) {
    if (starts_in_reasoning_) s.reasoning = "";
    return s;
  }
  const bool opened = text.substr(0, kStart.size()) == kStart;
  if (!opened && !starts_in_reasoning_) {
    s.content = text;
    return s;
  }
  const std::string_view body = opened ? text.substr(kStart.size()) : text;
  const size_t end = body.find(kEnd);
  if (end == std::string_view::npos) {
    s.reasoning = body.substr(0, body.size() - (final ? 0 : MarkerPrefixAtEnd(body, kEnd)));
    return s;
  }
  s.reasoning = body.substr(0, end);
  s.content = body.substr(end + kEnd.size());
  return s;
}

ReasoningStream::Delta ReasoningStream::Add(std::string_view text) {
  text_ += text;
  return Diff(parser_.Split(text_, false));
}

ReasoningStream::Delta ReasoningStream::Finish() {
  return Diff(parser_.Split(text_, true));
}

ReasoningStream::Delta ReasoningStream::Diff(const ReasoningSplit& split) {
  Delta d;
  if (split.reasoning && split.reasoning->size() > reasoning_sent_) {
    d.reasoning = split.reasoning->substr(reasoning_sent_);
    reasoning_sent_ = split.reasoning->size();
  }
  if (split.content.size() > content_sent_) {
    d.content = split.content.substr(content_sent_);
    content_sent_ = split.content.size();
  }
  return d;
}

}  // namespace pagellm
