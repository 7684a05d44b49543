#include "outparse/pythonic_tool_parser.h"

#include "outparse/python_call_list.h"

namespace pagellm {
namespace {

constexpr std::string_view kStart = "<|python_start|>";
constexpr std::string_view kEnd = "<|python_end|>";

size_t SkipSpace(std::string_view t, size_t i) {
  while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i;
  return i;
}

}  // namespace

ToolParse PythonicToolParser::Parse(std::string_view text, bool final) const {
  const ToolParse content{std::string(text), {}};
  ToolParse out;
  size_t pos = SkipSpace(text, 0);
  std::string_view rest = text.substr(pos);
  // Until the first non-space text shows whether this is a call list, nothing is content yet.
  if (rest.empty() || (rest.size() < kStart.size() && kStart.substr(0, rest.size()) == rest))
    return final ? content : out;
  if (rest.substr(0, kStart.size()) == kStart) pos = SkipSpace(text, pos + kStart.size());
  if (pos < text.size() && text[pos] != '[') return content;
  const PythonCallList list = ReadPythonCallList(text.substr(pos));
  if (!final) {
    out.calls = list.calls;
    return out;
  }
  if (list.error || !list.closed || list.calls.empty()) return content;
  // Nothing but the closing tag and space may follow the list.
  size_t after = SkipSpace(text, pos + list.end);
  if (text.substr(after, kEnd.size()) == kEnd) after = SkipSpace(text, after + kEnd.size());
  if (after != text.size()) return content;
  out.calls = list.calls;
  return out;
}

}  // namespace pagellm
