// Parser: builds the statement tree of a template from the lexer's tokens, following jinja2's
// grammar and operator precedence (filters bind tighter than arithmetic, `not` looser than
// comparisons, conditional expressions loosest), with the loopcontrols extension's
// break/continue and transformers' {% generation %} block.
#pragma once

#include <string_view>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"
#include "pagellm/status.h"

namespace pagellm::jinja {

class Parser {
 public:
  // Deepest nesting of expressions and blocks accepted. jinja2 hits Python's recursion limit
  // a little above this; real chat templates stay far below it.
  static constexpr int kMaxDepth = 100;

  // Parses a token list ending in kEof. Unknown filters and tests are errors here, as they
  // are when jinja2 compiles a template.
  static StatusOr<Body> Parse(std::vector<Token> tokens);
};

}  // namespace pagellm::jinja
