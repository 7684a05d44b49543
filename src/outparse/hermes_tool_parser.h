// <tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks (Hermes 2 Pro, Qwen2.5 / Qwen3
// chat templates); the content is the text before the first block.
#pragma once

#include "outparse/tool_call_parser.h"

namespace pagellm {

class HermesToolParser : public ToolCallParser {
 public:
  ToolParse Parse(std::string_view text, bool final) const override;
};

}  // namespace pagellm
