// Lexer: splits Jinja template source into tokens exactly as jinja2's lexer does, including
// its whitespace rules (`-`/`+` markers, trim_blocks, lstrip_blocks, the dropped final
// newline, newline normalization), raw blocks, comments and string-literal escapes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pagellm/status.h"

namespace pagellm::jinja {

enum class TokenType {
  kData,           // template text outside tags
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,  // text holds the operator: "+", "//", "==", "(", ...
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;  // data, name, unescaped string, operator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

struct LexerOptions {
  // Hugging Face compiles chat templates with trim_blocks=True and lstrip_blocks=True.
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

class Lexer {
 public:
  // Tokenizes `source`; the last token is always kEof. Errors carry jinja2's message and the
  // line ("unexpected char '$' at 12 (line 1)").
  static StatusOr<std::vector<Token>> Tokenize(std::string_view source,
                                               const LexerOptions& options);
};

}  // namespace pagellm::jinja
