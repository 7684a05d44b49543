// Llama 3.1+ JSON tool calls: the output is {"name": ..., "parameters": {...}} objects (optionally
// after <|python_tag|>, several separated by ";"); otherwise it is all content.
#pragma once

#include "outparse/tool_call_parser.h"

namespace pagellm {

class Llama3JsonToolParser : public ToolCallParser {
 public:
  ToolParse Parse(std::string_view text, bool final) const override;
};

}  // namespace pagellm
