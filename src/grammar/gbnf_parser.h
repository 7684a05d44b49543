// GBNF, llama.cpp's grammar format (grammars/README.md of llama.cpp), parsed into a Grammar:
//   rule-name ::= alternative | alternative ...      (the start rule is `root`)
//   "literal" with escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH; [character classes] with
//   ranges, ^ negation and the same escapes; `.` any character; ( groups ); rule references;
//   postfix * + ? {m} {m,} {m,n} {,n}; # comments to the end of the line.
// Rules may span lines; a new rule starts at `name ::=`. Errors name the line and column.
#pragma once

#include <string_view>

#include "grammar/grammar.h"
#include "pagellm/status.h"

namespace pagellm {

StatusOr<Grammar> ParseGbnf(std::string_view text);

}  // namespace pagellm
