// One tool call written as a JSON object, {"name": ..., "arguments": {...}} (hermes, mistral)
// or {"name": ..., "parameters": {...}} (llama3_json), read from text that may be cut anywhere.
#pragma once

#include <string_view>

#include "outparse/tool_call_parser.h"

namespace pagellm {

struct JsonToolCallRead {
  ParsedToolCall call;  // complete once the object is closed (arguments "{}" when absent)
  bool error = false;   // not a call object (or a name that is not a string)
  size_t end = 0;       // when call.complete: offset just past the object
};

// `text` starts with the object (leading whitespace allowed).
JsonToolCallRead ReadJsonToolCall(std::string_view text);

}  // namespace pagellm
