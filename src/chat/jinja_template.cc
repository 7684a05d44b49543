#include "chat/jinja_template.h"

#include "chat/jinja_parser.h"

namespace pagellm::jinja {

StatusOr<Template> Template::Parse(std::string_view source, const LexerOptions& options) {
  ASSIGN_OR_RETURN(std::vector<Token> tokens, Lexer::Tokenize(source, options));
  ASSIGN_OR_RETURN(Body body, Parser::Parse(std::move(tokens)));
  return Template(std::make_shared<const Body>(std::move(body)));
}

StatusOr<std::string> Template::Render(const ValueDict& context, const RenderLimits& limits) const {
  Interpreter interp(limits);
  return interp.Render(*body_, context);
}

}  // namespace pagellm::jinja
