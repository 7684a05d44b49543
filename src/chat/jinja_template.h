// Template: a compiled Jinja template. Parse once, render many times (renders are
// independent and may run concurrently).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "chat/jinja_ast.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_value.h"
#include "pagellm/status.h"

namespace pagellm::jinja {

class Template {
 public:
  // Syntax errors (and unknown filters or tests) are InvalidArgument with jinja2's message
  // and the line.
  static StatusOr<Template> Parse(std::string_view source, const LexerOptions& options = {});

  // Renders with `context` as the template's variables.
  StatusOr<std::string> Render(const ValueDict& context, const RenderLimits& limits = {}) const;

  const Body& body() const { return *body_; }

 private:
  explicit Template(std::shared_ptr<const Body> body) : body_(std::move(body)) {}
  std::shared_ptr<const Body> body_;
};

}  // namespace pagellm::jinja
