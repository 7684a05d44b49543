// Regular expressions (the subset JSON Schema `pattern`, vLLM's guided_regex and outlines
// accept in practice: Python / ECMAScript syntax) translated into grammar rules. The whole
// output must match (vLLM's semantics), so a leading ^ and a trailing $ are accepted and
// ignored. Supported: literals, escapes (\n \t \r \f \v \0 \xHH \uHHHH and escaped
// punctuation), . (any character but \n), classes [...] with ranges and negation, \d \w \s
// \D \W \S (ASCII meanings), groups ( ), (?: ), (?P<name> ), (?<name> ), alternation |,
// quantifiers * + ? {m} {m,} {m,n} {,n} with an optional lazy ?. Rejected with an error
// naming the offset: backreferences, lookaround, word boundaries, anchors elsewhere, flags.
#pragma once

#include <string_view>

#include "grammar/grammar.h"
#include "pagellm/status.h"

namespace pagellm {

// How matched characters are written in the output.
enum class RegexContext {
  kRaw,         // as themselves (a whole-output regex)
  kJsonString,  // inside a JSON string: '"', '\' and control characters in their JSON escapes
};

// Adds rules matching `regex` to `g`; returns the symbol of the whole regex.
StatusOr<GrammarSymbol> AddRegex(Grammar& g, std::string_view regex, RegexContext context,
                                 std::string_view name);

// A grammar whose root matches exactly `regex` (kRaw).
StatusOr<Grammar> RegexToGrammar(std::string_view regex);

}  // namespace pagellm
