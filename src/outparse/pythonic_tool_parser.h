// Python call syntax, [f(a=1, b="x"), g()] (Llama 3.2 / Llama 4 pythonic tool calling, optionally
// in <|python_start|> ... <|python_end|>); otherwise the output is all content. Argument values are
// Python literals (str, int, float, True / False / None, lists, tuples, dicts).
#pragma once

#include "outparse/tool_call_parser.h"

namespace pagellm {

class PythonicToolParser : public ToolCallParser {
 public:
  ToolParse Parse(std::string_view text, bool final) const override;
};

}  // namespace pagellm
