// JSON Schema -> Grammar, for vLLM's guided_json / structured_outputs.json, OpenAI's
// response_format json_schema and llama.cpp's json_schema. Every string the grammar matches is
// JSON that validates against the schema; where a keyword cannot be expressed exactly, either
// a valid subset is generated (noted below) or the schema is refused with a message naming the
// keyword and its JSON pointer, never silently ignored.
//
// Supported: type (incl. lists), properties / required / additionalProperties (false when
// absent, as OpenAI's strict mode and xgrammar's default; properties are written in schema
// order), enum / const, items / prefixItems / minItems / maxItems, anyOf / oneOf (as
// alternatives; oneOf's exclusivity is not enforced), allOf (merged when the parts do not
// conflict), $ref / $defs / definitions incl. recursion, string minLength / maxLength / pattern
// / format (date, time, date-time, email, uuid, ipv4; other formats are annotations),
// integer minimum / maximum / exclusiveMinimum / exclusiveMaximum (exact), number bounds (a
// valid subset: integers within the bounds, or any non-negative / positive number for a
// bound of 0), nullable (OpenAPI). Annotations (title, description, default, examples, ...)
// are ignored.
// Refused: uniqueItems, contains, patternProperties, propertyNames, min/maxProperties,
// dependencies, if/then/else, not, multipleOf (except integer 1), a schema that matches
// nothing, and recursion without a base case (Grammar::Validate).
//
// Whitespace between JSON tokens: by default at most one space, or a newline followed by up to
// 20 spaces or tabs (llama.cpp's choice: room for pretty-printing, yet bounded, so that a
// constrained generation cannot wander off into whitespace forever); `whitespace_pattern`, a
// regex, replaces it (vLLM's / outlines' option).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "grammar/grammar.h"
#include "pagellm/status.h"

namespace pagellm {

struct JsonGrammarOptions {
  std::optional<std::string> whitespace_pattern;
};

// `schema_text`: the schema as JSON text.
StatusOr<Grammar> JsonSchemaToGrammar(std::string_view schema_text,
                                      const JsonGrammarOptions& options = {});
// Any JSON value whose top level is an object (response_format json_object, guided_json_object).
StatusOr<Grammar> JsonObjectGrammar(const JsonGrammarOptions& options = {});

}  // namespace pagellm
