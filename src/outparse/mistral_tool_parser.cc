#include "outparse/mistral_tool_parser.h"

#include <random>

#include "outparse/json_prefix.h"
#include "outparse/json_tool_call.h"

namespace pagellm {
namespace {

constexpr std::string_view kToolCalls = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";

size_t SkipSpace(std::string_view t, size_t i) {
  while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i;
  return i;
}

// [TOOL_CALLS][{...}, {...}] (tokenizer v3 to v7). Returns false on malformed text.
bool ReadJsonList(std::string_view text, size_t pos, bool final, ToolParse* out) {
  ++pos;  // '['
  while (true) {
    pos = SkipSpace(text, pos);
    if (pos >= text.size()) return !final;
    if (text[pos] == ']' && out->calls.empty()) return true;
    const JsonToolCallRead r = ReadJsonToolCall(text.substr(pos));
    if (r.error) return false;
    if (!r.call.complete) {
      if (final) return false;
      if (!r.call.name.empty()) out->calls.push_back(r.call);
      return true;
    }
    out->calls.push_back(r.call);
    pos = SkipSpace(text, pos + r.end);
    if (pos >= text.size()) return !final;
    if (text[pos] == ']') return true;
    if (text[pos] != ',') return false;
    ++pos;
  }
}

// name[ARGS]{...}, repeated after further [TOOL_CALLS] (tokenizer v11+).
bool ReadNamedCalls(std::string_view text, size_t pos, bool final, ToolParse* out) {
  while (true) {
    const size_t args = text.find(kArgs, pos);
    if (args == std::string_view::npos) return !final;
    ParsedToolCall call;
    call.name = std::string(text.substr(pos, args - pos));
    if (call.name.empty() || call.name.find_first_of(" \n{[\"") != std::string::npos) return false;
    const JsonPrefix p = CanonicalJsonPrefix(text.substr(args + kArgs.size()));
    if (p.error) return false;
    call.arguments = p.text;
    call.complete = p.complete;
    out->calls.push_back(std::move(call));
    if (!p.complete) return !final;
    pos = SkipSpace(text, args + kArgs.size() + p.end);
    if (pos >= text.size()) return true;
    const std::string_view rest = text.substr(pos);
    if (rest.substr(0, kToolCalls.size()) != kToolCalls)
      return !final && kToolCalls.substr(0, rest.size()) == rest;
    pos = SkipSpace(text, pos + kToolCalls.size());
  }
}

}  // namespace

ToolParse MistralToolParser::Parse(std::string_view text, bool final) const {
  ToolParse out;
  const size_t marker = text.find(kToolCalls);
  if (marker == std::string_view::npos) {
    out.content = text.substr(0, text.size() - (final ? 0 : MarkerPrefixAtEnd(text, kToolCalls)));
    return out;
  }
  out.content = text.substr(0, marker);
  const size_t pos = SkipSpace(text, marker + kToolCalls.size());
  if (pos >= text.size()) {
    if (final) return ToolParse{std::string(text), {}};
    return out;
  }
  const bool ok = text[pos] == '[' ? ReadJsonList(text, pos, final, &out)
                                   : ReadNamedCalls(text, pos, final, &out);
  if (final && (!ok || out.calls.empty())) return ToolParse{std::string(text), {}};
  return out;
}

std::string MistralToolParser::NewCallId() const {
  static constexpr std::string_view kAlphabet =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id(9, ' ');
  for (char& c : id) c = kAlphabet[rng() % kAlphabet.size()];
  return id;
}

}  // namespace pagellm
