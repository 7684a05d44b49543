#include "outparse/forced_tool_call_parser.h"

#include "outparse/json_prefix.h"
#include "outparse/json_tool_call.h"

namespace pagellm {
namespace {

size_t SkipSpace(std::string_view t, size_t i) {
  while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i;
  return i;
}

}  // namespace

ToolParse RequiredToolCallParser::Parse(std::string_view text, bool final) const {
  ToolParse out;
  const ToolParse content{std::string(text), {}};
  size_t pos = SkipSpace(text, 0);
  if (pos >= text.size()) return final ? content : out;
  if (text[pos] != '[') return final ? content : out;
  ++pos;
  while (true) {
    pos = SkipSpace(text, pos);
    if (pos >= text.size()) return final ? content : out;
    const JsonToolCallRead r = ReadJsonToolCall(text.substr(pos));
    if (r.error) return final ? content : out;
    if (!r.call.complete) {
      if (final) return content;
      if (!r.call.name.empty()) out.calls.push_back(r.call);
      return out;
    }
    out.calls.push_back(r.call);
    pos = SkipSpace(text, pos + r.end);
    if (pos >= text.size()) return final ? content : out;
    if (text[pos] == ']') return out;
    if (text[pos] != ',') return final ? content : out;
    ++pos;
  }
}

ToolParse NamedToolCallParser::Parse(std::string_view text, bool final) const {
  const JsonPrefix p = CanonicalJsonPrefix(text);
  if (final && (!p.complete || p.error)) return ToolParse{std::string(text), {}};
  ToolParse out;
  if (p.error) return out;
  out.calls.push_back({name_, p.text, p.complete});
  return out;
}

}  // namespace pagellm
