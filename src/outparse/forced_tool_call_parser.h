// The outputs of tool_choice "required" and a named tool_choice, which a grammar forces (as
// vLLM forces them): "required" writes a JSON list [{"name": ..., "parameters": {...}}, ...],
// a named choice writes the function's arguments object alone.
#pragma once

#include <string>

#include "outparse/tool_call_parser.h"

namespace pagellm {

class RequiredToolCallParser : public ToolCallParser {
 public:
  ToolParse Parse(std::string_view text, bool final) const override;
};

class NamedToolCallParser : public ToolCallParser {
 public:
  explicit NamedToolCallParser(std::string name) : name_(std::move(name)) {}
  ToolParse Parse(std::string_view text, bool final) const override;

 private:
  std::string name_;
};

}  // namespace pagellm
