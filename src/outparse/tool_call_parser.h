// Tool-call parsers (vLLM's --tool-call-parser): each turns a model's generated text, in one
// model family's tool-call format, into OpenAI tool calls plus the remaining content.
//   hermes       <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Hermes 2 Pro, Qwen)
//   llama3_json  {"name": ..., "parameters": {...}} (Llama 3.1+ JSON tool calling), optionally
//                after <|python_tag|>, several separated by ";"
//   mistral      [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
//   pythonic     [f(a=1, b="x"), g()] (Python call syntax, Llama 3.2 / 4 style)
// Arguments are always a JSON object's text as Python's json.dumps writes it (vLLM's
// spelling), so streamed fragments concatenate to the non-streamed arguments.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pagellm/status.h"

namespace pagellm {

struct ParsedToolCall {
  std::string name;       // empty until the whole name is known
  std::string arguments;  // JSON object text; while !complete a prefix of it
  bool complete = false;
};

struct ToolParse {
  std::string content;  // the output's text that is not a tool call
  std::vector<ParsedToolCall> calls;
};

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;
  // `text` is the whole output so far; `final`: it is the whole output. A partial parse
  // (final = false) holds back text that may still turn out to start a call, reports a call
  // once its name is whole, and its arguments as a prefix; for well-formed output every
  // partial parse is a prefix of the final one. A final parse of malformed call text returns
  // no calls and the whole text as content (vLLM falls back the same way).
  virtual ToolParse Parse(std::string_view text, bool final) const = 0;
  // A new tool-call id in the format's convention.
  virtual std::string NewCallId() const;
};

// The parsers by their vLLM names; an unknown name is InvalidArgument listing the known ones.
StatusOr<std::unique_ptr<ToolCallParser>> CreateToolCallParser(std::string_view name);
const std::vector<std::string>& ToolCallParserNames();

// vLLM's tool-call id: "chatcmpl-tool-" + 32 random hex digits.
std::string RandomToolCallId();

// Text that may be the start of `marker` (a proper prefix of it) at the end of `text`: its
// length, 0 when none. A streaming parser holds such text back.
size_t MarkerPrefixAtEnd(std::string_view text, std::string_view marker);

}  // namespace pagellm
