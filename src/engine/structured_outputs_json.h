// Structured-output constraints from request JSON, in every spelling clients send:
//   OpenAI      response_format {"type": "json_object"} / {"type": "json_schema",
//               "json_schema": {"name", "schema", "strict"}} / {"type": "text"}
//   vLLM        structured_outputs {json | regex | choice | grammar | json_object,
//               whitespace_pattern} (also spelled guided_decoding, as in older SamplingParams)
//               and the legacy guided_json, guided_regex, guided_choice, guided_grammar,
//               guided_whitespace_pattern
//   llama.cpp   grammar (GBNF text), json_schema (a schema object), and response_format
//               {"type": "json_object", "schema": {...}}
// At most one constraint per request; two are an InvalidArgument naming both.
#pragma once

#include <optional>

#include "nlohmann/json.hpp"
#include "pagellm/sampling_params.h"
#include "pagellm/status.h"

namespace pagellm {

StatusOr<std::optional<StructuredOutputs>> ParseStructuredOutputs(const nlohmann::json& body);

}  // namespace pagellm
