// Mistral: [TOOL_CALLS] then a JSON list of {"name", "arguments"} objects (tokenizer v3+), or
// name[ARGS]{...} per call (tokenizer v11+); the content is the text before [TOOL_CALLS]. Ids are 9
// alphanumerics, as Mistral's templates require.
#pragma once

#include "outparse/tool_call_parser.h"

namespace pagellm {

class MistralToolParser : public ToolCallParser {
 public:
  ToolParse Parse(std::string_view text, bool final) const override;
  std::string NewCallId() const override;
};

}  // namespace pagellm
