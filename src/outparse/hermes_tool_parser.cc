#include "outparse/hermes_tool_parser.h"

#include "outparse/json_tool_call.h"

namespace pagellm {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

size_t SkipSpace(std::string_view t, size_t i) {
  while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i;
  return i;
}

ToolParse Fallback(std::string_view text) {
  return ToolParse{std::string(text), {}};
}

}  // namespace

ToolParse HermesToolParser::Parse(std::string_view text, bool final) const {
  ToolParse out;
  size_t pos = text.find(kOpen);
  if (pos == std::string_view::npos) {
    out.content = text.substr(0, text.size() - (final ? 0 : MarkerPrefixAtEnd(text, kOpen)));
    return out;
  }
  out.content = text.substr(0, pos);
  while (true) {
    const size_t body = pos + kOpen.size();
    const JsonToolCallRead r = ReadJsonToolCall(text.substr(body));
    if (r.error) return final ? Fallback(text) : out;
    if (!r.call.complete) {
      // An unclosed object is malformed output once the text has ended.
      if (final) return Fallback(text);
      if (!r.call.name.empty()) out.calls.push_back(r.call);
      return out;
    }
    out.calls.push_back(r.call);
    size_t i = SkipSpace(text, body + r.end);
    // The closing tag may be missing at the very end (vLLM accepts an unclosed last block).
    if (i >= text.size()) return out;
    const std::string_view rest = text.substr(i);
    if (rest.substr(0, kClose.size()) != kClose) {
      if (!final && kClose.substr(0, rest.size()) == rest) return out;
      return final ? Fallback(text) : out;
    }
    i = SkipSpace(text, i + kClose.size());
    // Text after the last block is not content (vLLM's hermes parser drops it).
    pos = text.find(kOpen, i);
    if (pos == std::string_view::npos) return out;
  }
}

}  // namespace pagellm
