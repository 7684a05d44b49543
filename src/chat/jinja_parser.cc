#include "chat/jinja_parser.h"

#include <initializer_list>
#include <string>

#include "chat/jinja_expression_parser.h"

namespace pagellm::jinja {
namespace {

StmtPtr MakeStmt(StmtKind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

class ParserImpl : public ExpressionParser {
 public:
  explicit ParserImpl(std::vector<Token> tokens) : ExpressionParser(std::move(tokens)) {}

  StatusOr<Body> ParseTemplate() {
    Body body;
    RETURN_IF_ERROR(Subparse(nullptr, &body));
    return body;
  }

 private:
  // --- statements ---------------------------------------------------------------------------
  Status Subparse(const std::vector<Rule>* end_rules, Body* body) {
    DepthGuard guard(this);
    if (guard.exceeded()) return Fail("template nesting too deep");
    if (end_rules) end_stack_.push_back(*end_rules);
    Status status = SubparseLoop(end_rules, body);
    if (end_rules) end_stack_.pop_back();
    return status;
  }

  Status SubparseLoop(const std::vector<Rule>* end_rules, Body* body) {
    while (Current().type != TokenType::kEof) {
      const Token& token = Current();
      if (token.type == TokenType::kData) {
        auto text = MakeStmt(StmtKind::kText, token.line);
        text->text = token.text;
        body->push_back(std::move(text));
        Next();
      } else if (token.type == TokenType::kVariableBegin) {
        Next();
        auto print = MakeStmt(StmtKind::kPrint, Current().line);
        ASSIGN_OR_RETURN(print->expr, ParseTuple(false, true, {}, false));
        RETURN_IF_ERROR(Expect(TokenType::kVariableEnd));
        body->push_back(std::move(print));
      } else if (token.type == TokenType::kBlockBegin) {
        Next();
        if (end_rules) {
          for (const Rule& r : *end_rules) {
            if (Matches(Current(), r)) return Status::Ok();
          }
        }
        RETURN_IF_ERROR(ParseStatement(body));
        RETURN_IF_ERROR(Expect(TokenType::kBlockEnd));
      } else {
        return Fail("unexpected '" + Describe(token) + "'");
      }
    }
    return Status::Ok();
  }

  Status FailUnknownTag(const std::string* name, int line) {
    std::string message = name ? "Encountered unknown tag '" + *name + "'."
                               : std::string("Unexpected end of template.");
    if (!end_stack_.empty()) {
      std::string looking;
      for (const Rule& r : end_stack_.back()) {
        if (!looking.empty()) looking += " or ";
        looking += "'" + DescribeRule(r) + "'";
      }
      bool expected = false;
      for (const auto& rules : end_stack_) {
        for (const Rule& r : rules) expected |= name && DescribeRule(r) == *name;
      }
      message += expected ? " You probably made a nesting mistake. Jinja is expecting this tag, "
                            "but currently looking for " +
                                looking + "."
                          : " Jinja was looking for the following tags: " + looking + ".";
    }
    if (!tag_stack_.empty()) {
      message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
    }
    return Fail(message, line);
  }

  Status ParseStatements(std::vector<Rule> end_rules, bool drop_needle, Body* body) {
    SkipOp(":");
    RETURN_IF_ERROR(Expect(TokenType::kBlockEnd));
    RETURN_IF_ERROR(Subparse(&end_rules, body));
    if (Current().type == TokenType::kEof) {
      end_stack_.push_back(end_rules);
      Status s = FailUnknownTag(nullptr, Current().line);
      end_stack_.pop_back();
      return s;
    }
    if (drop_needle) Next();
    return Status::Ok();
  }

  Status ParseStatement(Body* body) {
    const Token& token = Current();
    if (token.type != TokenType::kName) return Fail("tag name expected");
    const std::string tag = token.text;
    const int line = token.line;
    static const char* kUnsupported[] = {"block", "extends", "include", "import", "from"};
    for (const char* u : kUnsupported) {
      if (tag == u)
        return Fail("the '" + tag +
                        "' tag needs a template loader, which chat "
                        "templates do not have",
                    line);
    }
    tag_stack_.push_back(tag);
    Status s = ParseStatementBody(tag, line, body);
    tag_stack_.pop_back();
    return s;
  }

  Status ParseStatementBody(const std::string& tag, int line, Body* body) {
    if (tag == "if") return ParseIf(body);
    if (tag == "for") return ParseFor(body);
    if (tag == "set") return ParseSet(body);
    if (tag == "macro") return ParseMacro(body);
    if (tag == "call") return ParseCallBlock(body);
    if (tag == "filter") return ParseFilterBlock(body);
    if (tag == "with") return ParseWith(body);
    if (tag == "print") {
      Next();
      bool first = true;
      while (Current().type != TokenType::kBlockEnd) {
        if (!first) RETURN_IF_ERROR(ExpectOp(","));
        first = false;
        auto print = MakeStmt(StmtKind::kPrint, Current().line);
        ASSIGN_OR_RETURN(print->expr, ParseExpression(true));
        body->push_back(std::move(print));
      }
      return Status::Ok();
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return Fail("'" + tag + "' outside loop", line);
      Next();
      body->push_back(MakeStmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, line));
      return Status::Ok();
    }
    if (tag == "generation" || tag == "autoescape") {
      Next();
      auto scope = MakeStmt(StmtKind::kScope, line);
      if (tag == "autoescape") {
        ASSIGN_OR_RETURN(scope->expr, ParseExpression(true));
      }
      RETURN_IF_ERROR(ParseStatements(
          {NameRule(tag == "generation" ? "endgeneration" : "endautoescape")}, true, &scope->body));
      body->push_back(std::move(scope));
      return Status::Ok();
    }
    tag_stack_.pop_back();
    Status s = FailUnknownTag(&tag, line);
    tag_stack_.push_back(tag);
    return s;
  }

  Status ParseIf(Body* body) {
    auto stmt = MakeStmt(StmtKind::kIf, Current().line);
    Next();
    while (true) {
      ASSIGN_OR_RETURN(ExprPtr test, ParseTuple(false, false, {}, false));
      Body branch;
      RETURN_IF_ERROR(
          ParseStatements({NameRule("elif"), NameRule("else"), NameRule("endif")}, false, &branch));
      stmt->branches.emplace_back(std::move(test), std::move(branch));
      std::string which = Current().text;
      Next();
      if (which == "elif") continue;
      if (which == "else") {
        RETURN_IF_ERROR(ParseStatements({NameRule("endif")}, true, &stmt->else_body));
      }
      break;
    }
    body->push_back(std::move(stmt));
    return Status::Ok();
  }

  Status ParseFor(Body* body) {
    auto stmt = MakeStmt(StmtKind::kFor, Current().line);
    Next();
    ASSIGN_OR_RETURN(stmt->target, ParseAssignTarget(true, false, {NameRule("in")}, false));
    RETURN_IF_ERROR(ExpectName("in").status());
    ASSIGN_OR_RETURN(stmt->expr, ParseTuple(false, false, {NameRule("recursive")}, false));
    if (SkipName("if")) {
      ASSIGN_OR_RETURN(stmt->cond, ParseExpression(true));
    }
    stmt->recursive = SkipName("recursive");
    ++loop_depth_;
    Status s = ParseStatements({NameRule("endfor"), NameRule("else")}, false, &stmt->body);
    --loop_depth_;
    RETURN_IF_ERROR(s);
    std::string which = Current().text;
    Next();
    if (which != "endfor") {
      RETURN_IF_ERROR(ParseStatements({NameRule("endfor")}, true, &stmt->else_body));
    }
    body->push_back(std::move(stmt));
    return Status::Ok();
  }

  Status ParseSet(Body* body) {
    const int line = Current().line;
    Next();
    ASSIGN_OR_RETURN(ExprPtr target, ParseAssignTarget(true, false, {}, true));
    if (SkipOp("=")) {
      auto stmt = MakeStmt(StmtKind::kSet, line);
      stmt->target = std::move(target);
      ASSIGN_OR_RETURN(stmt->expr, ParseTuple(false, true, {}, false));
      body->push_back(std::move(stmt));
      return Status::Ok();
    }
    auto stmt = MakeStmt(StmtKind::kSetBlock, line);
    stmt->target = std::move(target);
    if (IsOp("|")) {
      ASSIGN_OR_RETURN(stmt->expr, ParseFilter(nullptr, false));
    }
    RETURN_IF_ERROR(ParseStatements({NameRule("endset")}, true, &stmt->body));
    body->push_back(std::move(stmt));
    return Status::Ok();
  }

  Status ParseSignature(Stmt* stmt) {
    RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!stmt->params.empty()) RETURN_IF_ERROR(ExpectOp(","));
      ASSIGN_OR_RETURN(std::string param, ExpectName());
      if (SkipOp("=")) {
        ASSIGN_OR_RETURN(ExprPtr def, ParseExpression(true));
        stmt->defaults.push_back(std::move(def));
      } else if (!stmt->defaults.empty()) {
        return Fail("non-default argument follows default argument");
      }
      stmt->params.push_back(std::move(param));
    }
    return ExpectOp(")");
  }

  // Macro and call-block bodies are functions: break/continue cannot reach an outer loop.
  Status ParseFunctionBody(std::string_view end_tag, Body* body) {
    int saved = loop_depth_;
    loop_depth_ = 0;
    Status s = ParseStatements({NameRule(end_tag)}, true, body);
    loop_depth_ = saved;
    return s;
  }

  Status ParseMacro(Body* body) {
    auto stmt = MakeStmt(StmtKind::kMacro, Current().line);
    Next();
    ASSIGN_OR_RETURN(stmt->name, ExpectName());
    RETURN_IF_ERROR(ParseSignature(stmt.get()));
    RETURN_IF_ERROR(ParseFunctionBody("endmacro", &stmt->body));
    body->push_back(std::move(stmt));
    return Status::Ok();
  }

  Status ParseCallBlock(Body* body) {
    auto stmt = MakeStmt(StmtKind::kCallBlock, Current().line);
    Next();
    if (IsOp("(")) RETURN_IF_ERROR(ParseSignature(stmt.get()));
    ASSIGN_OR_RETURN(stmt->expr, ParseExpression(true));
    if (stmt->expr->kind != ExprKind::kCall) return Fail("expected call", stmt->line);
    RETURN_IF_ERROR(ParseFunctionBody("endcall", &stmt->body));
    body->push_back(std::move(stmt));
    return Status::Ok();
  }

  Status ParseFilterBlock(Body* body) {
    auto stmt = MakeStmt(StmtKind::kFilterBlock, Current().line);
    Next();
    ASSIGN_OR_RETURN(stmt->expr, ParseFilter(nullptr, true));
    RETURN_IF_ERROR(ParseStatements({NameRule("endfilter")}, true, &stmt->body));
    body->push_back(std::move(stmt));
    return Status::Ok();
  }

  Status ParseWith(Body* body) {
    auto stmt = MakeStmt(StmtKind::kWith, Current().line);
    Next();
    while (Current().type != TokenType::kBlockEnd) {
      if (!stmt->targets.empty()) RETURN_IF_ERROR(ExpectOp(","));
      ASSIGN_OR_RETURN(ExprPtr target, ParseAssignTarget(true, false, {}, false));
      RETURN_IF_ERROR(ExpectOp("="));
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      stmt->targets.push_back(std::move(target));
      stmt->values.push_back(std::move(value));
    }
    RETURN_IF_ERROR(ParseStatements({NameRule("endwith")}, true, &stmt->body));
    body->push_back(std::move(stmt));
    return Status::Ok();
  }

  int loop_depth_ = 0;
  std::vector<std::vector<Rule>> end_stack_;
  std::vector<std::string> tag_stack_;
};

}  // namespace

StatusOr<Body> Parser::Parse(std::vector<Token> tokens) {
  if (tokens.empty() || tokens.back().type != TokenType::kEof) {
    Token eof;
    eof.line = tokens.empty() ? 1 : tokens.back().line;
    tokens.push_back(eof);
  }
  ParserImpl impl(std::move(tokens));
  return impl.ParseTemplate();
}

}  // namespace pagellm::jinja
