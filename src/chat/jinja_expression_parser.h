// ExpressionParser: the token cursor and expression grammar shared by the Jinja parser
// (jinja2's parse_expression and below, plus assignment targets). Internal to the parser.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_parser.h"
#include "pagellm/status.h"

namespace pagellm::jinja {

// A token pattern as jinja2 writes them: a token type ("block_end") or "name:endfor".
struct Rule {
  TokenType type;
  std::string_view name;  // for kName: required text (empty: any name)
};

constexpr Rule NameRule(std::string_view name) {
  return {TokenType::kName, name};
}

std::string DescribeType(TokenType type);
std::string Describe(const Token& t);
std::string DescribeRule(const Rule& r);
ExprPtr MakeExpr(ExprKind kind, int line);

class ExpressionParser {
 public:
  explicit ExpressionParser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

 protected:
  // --- token stream -------------------------------------------------------------------------
  const Token& Current() const { return tokens_[pos_]; }
  const Token& Look() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
  void Next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  static bool Matches(const Token& t, const Rule& r) {
    if (t.type != r.type) return false;
    return r.type != TokenType::kName || r.name.empty() || t.text == r.name;
  }
  bool IsName(std::string_view name) const { return Matches(Current(), NameRule(name)); }
  bool IsOp(std::string_view op) const {
    return Current().type == TokenType::kOperator && Current().text == op;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }

  Status Fail(const std::string& message, int line = 0) const {
    return InvalidArgumentError(message + " (line " + std::to_string(line ? line : Current().line) +
                                ")");
  }
  Status ExpectOp(std::string_view op) {
    if (SkipOp(op)) return Status::Ok();
    return Fail("expected token '" + std::string(op) + "', got '" + Describe(Current()) + "'");
  }
  Status Expect(TokenType type) {
    if (Current().type == type) {
      Next();
      return Status::Ok();
    }
    return Fail("expected token '" + DescribeType(type) + "', got '" + Describe(Current()) + "'");
  }
  StatusOr<std::string> ExpectName(std::string_view name = {}) {
    if (Current().type == TokenType::kName && (name.empty() || Current().text == name)) {
      std::string text = Current().text;
      Next();
      return text;
    }
    return Fail("expected token '" + std::string(name.empty() ? "name" : name) + "', got '" +
                Describe(Current()) + "'");
  }

  // Guards recursion: every nested expression or block passes through here.
  class DepthGuard {
   public:
    explicit DepthGuard(ExpressionParser* p) : p_(p) { ++p_->depth_; }
    ~DepthGuard() { --p_->depth_; }
    bool exceeded() const { return p_->depth_ > Parser::kMaxDepth; }

   private:
    ExpressionParser* p_;
  };

  // Left-deep chains (a.b.c..., x|f|g..., 1+1+...) build trees as deep as they are long;
  // capping their length keeps evaluation and destruction of the tree shallow.
  static constexpr int kMaxChain = 1000;
  Status CheckChain(int* n) const {
    return ++*n > kMaxChain ? Fail("expression too long") : Status::Ok();
  }

  // --- expressions -------------------------------------------------------------------------
  StatusOr<ExprPtr> ParseAssignTarget(bool with_tuple, bool name_only,
                                      std::vector<Rule> extra_end_rules, bool with_namespace);
  StatusOr<ExprPtr> ParseExpression(bool with_condexpr);
  StatusOr<ExprPtr> ParseCondExpr();
  StatusOr<ExprPtr> ParseLogical(ExprKind kind, std::string_view keyword);
  StatusOr<ExprPtr> ParseNot();
  StatusOr<ExprPtr> ParseCompare();
  StatusOr<ExprPtr> ParseBinaryLevel(int level);
  StatusOr<ExprPtr> ParseUnary(bool with_filter);
  StatusOr<ExprPtr> ParsePrimary();
  bool IsTupleEnd(const std::vector<Rule>& extra_end_rules) const;
  StatusOr<ExprPtr> ParseTuple(bool simplified, bool with_condexpr,
                               const std::vector<Rule>& extra_end_rules, bool explicit_parentheses);
  StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  StatusOr<ExprPtr> ParseSubscript(ExprPtr node);
  StatusOr<ExprPtr> ParseSubscribed();
  Status ParseCallArgs(Expr* node);
  StatusOr<ExprPtr> ParseCall(ExprPtr node);
  StatusOr<std::string> ParseDottedName();
  StatusOr<ExprPtr> ParseFilter(ExprPtr node, bool start_inline);
  StatusOr<ExprPtr> ParseTest(ExprPtr node);
  StatusOr<ExprPtr> ParseOr() { return ParseLogical(ExprKind::kOr, "or"); }
  StatusOr<ExprPtr> ParseMath1() { return ParseBinaryLevel(0); }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace pagellm::jinja
