#include "outparse/llama3_json_tool_parser.h"

#include "outparse/json_tool_call.h"

namespace pagellm {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

size_t SkipSpace(std::string_view t, size_t i) {
  while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i;
  return i;
}

}  // namespace

ToolParse Llama3JsonToolParser::Parse(std::string_view text, bool final) const {
  ToolParse out;
  const ToolParse content{std::string(text), {}};
  size_t pos = SkipSpace(text, 0);
  const std::string_view rest = text.substr(pos);
  // Until the first non-space text shows whether this is a call, nothing is content yet.
  if (rest.empty() ||
      (rest.size() < kPythonTag.size() && kPythonTag.substr(0, rest.size()) == rest))
    return final ? content : out;
  if (rest.substr(0, kPythonTag.size()) == kPythonTag)
    pos = SkipSpace(text, pos + kPythonTag.size());
  if (pos < text.size() && text[pos] != '{') return content;
  while (pos < text.size()) {
    const JsonToolCallRead r = ReadJsonToolCall(text.substr(pos));
    if (r.error) return final ? content : out;
    if (!r.call.complete) {
      if (final) return content;
      if (!r.call.name.empty()) out.calls.push_back(r.call);
      return out;
    }
    out.calls.push_back(r.call);
    pos = SkipSpace(text, pos + r.end);
    if (pos >= text.size()) break;
    if (text[pos] != ';') return final ? content : out;
    pos = SkipSpace(text, pos + 1);
  }
  if (final && out.calls.empty()) return content;
  return out;
}

}  // namespace pagellm
