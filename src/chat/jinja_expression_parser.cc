#include "chat/jinja_expression_parser.h"

#include <optional>
#include <string>

#include "chat/jinja_builtins.h"

namespace pagellm::jinja {
namespace {

bool CanAssign(const Expr& e) {
  if (e.kind == ExprKind::kName || e.kind == ExprKind::kNSRef) return true;
  if (e.kind != ExprKind::kTuple) return false;
  for (const auto& item : e.args) {
    if (!CanAssign(*item)) return false;
  }
  return true;
}

}  // namespace

std::string DescribeType(TokenType type) {
  switch (type) {
    case TokenType::kData:
      return "template data / text";
    case TokenType::kVariableBegin:
      return "begin of print statement";
    case TokenType::kVariableEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kName:
      return "name";
    case TokenType::kString:
      return "string";
    case TokenType::kInteger:
      return "integer";
    case TokenType::kFloat:
      return "float";
    case TokenType::kOperator:
      return "operator";
    case TokenType::kEof:
      return "end of template";
  }
  return "token";
}

std::string Describe(const Token& t) {
  if (t.type == TokenType::kName || t.type == TokenType::kOperator) return t.text;
  return DescribeType(t.type);
}

std::string DescribeRule(const Rule& r) {
  return r.type == TokenType::kName && !r.name.empty() ? std::string(r.name) : DescribeType(r.type);
}

ExprPtr MakeExpr(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

StatusOr<ExprPtr> ExpressionParser::ParseAssignTarget(bool with_tuple, bool name_only,
                                                      std::vector<Rule> extra_end_rules,
                                                      bool with_namespace) {
  ExprPtr target;
  if (with_namespace && Look().type == TokenType::kOperator && Look().text == ".") {
    const int line = Current().line;
    ASSIGN_OR_RETURN(std::string name, ExpectName());
    Next();  // the dot
    ASSIGN_OR_RETURN(std::string attr, ExpectName());
    target = MakeExpr(ExprKind::kNSRef, line);
    target->name = std::move(name);
    target->attr = std::move(attr);
  } else if (name_only) {
    const int line = Current().line;
    ASSIGN_OR_RETURN(std::string name, ExpectName());
    target = MakeExpr(ExprKind::kName, line);
    target->name = std::move(name);
  } else if (with_tuple) {
    ASSIGN_OR_RETURN(target, ParseTuple(true, true, extra_end_rules, false));
  } else {
    ASSIGN_OR_RETURN(target, ParsePrimary());
  }
  if (!CanAssign(*target)) {
    return Fail(std::string("can't assign to '") +
                    (target->kind == ExprKind::kConst ? "const" : "expression") + "'",
                target->line);
  }
  return target;
}

// --- expressions -------------------------------------------------------------------------
StatusOr<ExprPtr> ExpressionParser::ParseExpression(bool with_condexpr) {
  DepthGuard guard(this);
  if (guard.exceeded()) return Fail("expression nesting too deep");
  return with_condexpr ? ParseCondExpr() : ParseOr();
}

StatusOr<ExprPtr> ExpressionParser::ParseCondExpr() {
  int line = Current().line;
  ASSIGN_OR_RETURN(ExprPtr expr1, ParseOr());
  int chain = 0;
  while (SkipName("if")) {
    RETURN_IF_ERROR(CheckChain(&chain));
    auto cond = MakeExpr(ExprKind::kCondExpr, line);
    ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
    ExprPtr otherwise;
    if (SkipName("else")) {
      ASSIGN_OR_RETURN(otherwise, ParseCondExpr());
    }
    cond->args.push_back(std::move(test));
    cond->args.push_back(std::move(expr1));
    cond->args.push_back(std::move(otherwise));
    expr1 = std::move(cond);
    line = Current().line;
  }
  return expr1;
}

StatusOr<ExprPtr> ExpressionParser::ParseLogical(ExprKind kind, std::string_view keyword) {
  int line = Current().line;
  ASSIGN_OR_RETURN(ExprPtr left,
                   kind == ExprKind::kOr ? ParseLogical(ExprKind::kAnd, "and") : ParseNot());
  int chain = 0;
  while (SkipName(keyword)) {
    RETURN_IF_ERROR(CheckChain(&chain));
    ASSIGN_OR_RETURN(ExprPtr right,
                     kind == ExprKind::kOr ? ParseLogical(ExprKind::kAnd, "and") : ParseNot());
    auto node = MakeExpr(kind, line);
    node->args.push_back(std::move(left));
    node->args.push_back(std::move(right));
    left = std::move(node);
    line = Current().line;
  }
  return left;
}

StatusOr<ExprPtr> ExpressionParser::ParseNot() {
  if (IsName("not")) {
    DepthGuard guard(this);
    if (guard.exceeded()) return Fail("expression nesting too deep");
    auto node = MakeExpr(ExprKind::kNot, Current().line);
    Next();
    ASSIGN_OR_RETURN(node->target, ParseNot());
    return node;
  }
  return ParseCompare();
}

StatusOr<ExprPtr> ExpressionParser::ParseCompare() {
  int line = Current().line;
  ASSIGN_OR_RETURN(ExprPtr expr, ParseMath1());
  ExprPtr node;
  while (true) {
    static const std::pair<std::string_view, CompareKind> kOps[] = {
        {"==", CompareKind::kEq}, {"!=", CompareKind::kNe}, {"<", CompareKind::kLt},
        {"<=", CompareKind::kLe}, {">", CompareKind::kGt},  {">=", CompareKind::kGe}};
    std::optional<CompareKind> op;
    if (Current().type == TokenType::kOperator) {
      for (const auto& [text, kind] : kOps) {
        if (Current().text == text) op = kind;
      }
      if (op) Next();
    }
    if (!op && SkipName("in")) op = CompareKind::kIn;
    if (!op && IsName("not") && Matches(Look(), NameRule("in"))) {
      Next();
      Next();
      op = CompareKind::kNotIn;
    }
    if (!op) break;
    if (!node) {
      node = MakeExpr(ExprKind::kCompare, line);
      node->args.push_back(std::move(expr));
    }
    ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
    node->compare_ops.push_back(*op);
    node->args.push_back(std::move(operand));
  }
  return node ? std::move(node) : std::move(expr);
}

StatusOr<ExprPtr> ExpressionParser::ParseBinaryLevel(int level) {
  // level 0: + -, level 1: ~ (concat), level 2: * / // %, level 3: **
  if (level == 4) return ParseUnary(true);
  int line = Current().line;
  ASSIGN_OR_RETURN(ExprPtr left, ParseBinaryLevel(level + 1));
  if (level == 1) {
    if (!IsOp("~")) return left;
    auto node = MakeExpr(ExprKind::kConcat, line);
    node->args.push_back(std::move(left));
    while (SkipOp("~")) {
      ASSIGN_OR_RETURN(ExprPtr next, ParseBinaryLevel(2));
      node->args.push_back(std::move(next));
    }
    return node;
  }
  int chain = 0;
  while (Current().type == TokenType::kOperator) {
    RETURN_IF_ERROR(CheckChain(&chain));
    const std::string& t = Current().text;
    std::optional<BinaryOp> op;
    if (level == 0 && t == "+") op = BinaryOp::kAdd;
    if (level == 0 && t == "-") op = BinaryOp::kSub;
    if (level == 2 && t == "*") op = BinaryOp::kMul;
    if (level == 2 && t == "/") op = BinaryOp::kDiv;
    if (level == 2 && t == "//") op = BinaryOp::kFloorDiv;
    if (level == 2 && t == "%") op = BinaryOp::kMod;
    if (level == 3 && t == "**") op = BinaryOp::kPow;
    if (!op) break;
    Next();
    ASSIGN_OR_RETURN(ExprPtr right, ParseBinaryLevel(level + 1));
    auto node = MakeExpr(ExprKind::kBinary, line);
    node->binary_op = *op;
    node->args.push_back(std::move(left));
    node->args.push_back(std::move(right));
    left = std::move(node);
    line = Current().line;
  }
  return left;
}

StatusOr<ExprPtr> ExpressionParser::ParseUnary(bool with_filter) {
  DepthGuard guard(this);
  if (guard.exceeded()) return Fail("expression nesting too deep");
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    node = MakeExpr(IsOp("-") ? ExprKind::kNeg : ExprKind::kPos, Current().line);
    Next();
    ASSIGN_OR_RETURN(node->target, ParseUnary(false));
  } else {
    ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

StatusOr<ExprPtr> ExpressionParser::ParsePrimary() {
  const Token& token = Current();
  if (token.type == TokenType::kName) {
    ExprPtr node;
    const std::string& v = token.text;
    if (v == "true" || v == "True" || v == "false" || v == "False") {
      node = MakeExpr(ExprKind::kConst, token.line);
      node->constant = Value::Bool(v == "true" || v == "True");
    } else if (v == "none" || v == "None") {
      node = MakeExpr(ExprKind::kConst, token.line);
      node->constant = Value::None();
    } else {
      node = MakeExpr(ExprKind::kName, token.line);
      node->name = v;
    }
    Next();
    return node;
  }
  if (token.type == TokenType::kString) {
    auto node = MakeExpr(ExprKind::kConst, token.line);
    std::string text;
    while (Current().type == TokenType::kString) {
      text += Current().text;
      Next();
    }
    node->constant = Value::String(std::move(text));
    return node;
  }
  if (token.type == TokenType::kInteger || token.type == TokenType::kFloat) {
    auto node = MakeExpr(ExprKind::kConst, token.line);
    node->constant = token.type == TokenType::kInteger ? Value::Int(token.int_value)
                                                       : Value::Float(token.float_value);
    Next();
    return node;
  }
  if (IsOp("(")) {
    Next();
    ASSIGN_OR_RETURN(ExprPtr node, ParseTuple(false, true, {}, true));
    RETURN_IF_ERROR(ExpectOp(")"));
    return node;
  }
  if (IsOp("[") || IsOp("{")) {
    const bool is_list = IsOp("[");
    const std::string close = is_list ? "]" : "}";
    auto node = MakeExpr(is_list ? ExprKind::kList : ExprKind::kDict, token.line);
    Next();
    while (!IsOp(close)) {
      if (!node->args.empty()) RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(close)) break;
      ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
      node->args.push_back(std::move(item));
      if (!is_list) {
        RETURN_IF_ERROR(ExpectOp(":"));
        ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        node->args.push_back(std::move(value));
      }
    }
    RETURN_IF_ERROR(ExpectOp(close));
    return node;
  }
  return Fail("unexpected '" + Describe(token) + "'");
}

bool ExpressionParser::IsTupleEnd(const std::vector<Rule>& extra_end_rules) const {
  const Token& t = Current();
  if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd || IsOp(")")) {
    return true;
  }
  for (const Rule& r : extra_end_rules) {
    if (Matches(t, r)) return true;
  }
  return false;
}

StatusOr<ExprPtr> ExpressionParser::ParseTuple(bool simplified, bool with_condexpr,
                                               const std::vector<Rule>& extra_end_rules,
                                               bool explicit_parentheses) {
  const int line = Current().line;
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) RETURN_IF_ERROR(ExpectOp(","));
    if (IsTupleEnd(extra_end_rules)) break;
    ExprPtr item;
    if (simplified) {
      ASSIGN_OR_RETURN(item, ParsePrimary());
    } else {
      ASSIGN_OR_RETURN(item, ParseExpression(with_condexpr));
    }
    args.push_back(std::move(item));
    if (IsOp(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parentheses) {
      return Fail("Expected an expression, got '" + Describe(Current()) + "'");
    }
  }
  auto node = MakeExpr(ExprKind::kTuple, line);
  node->args = std::move(args);
  return node;
}

StatusOr<ExprPtr> ExpressionParser::ParsePostfix(ExprPtr node) {
  int chain = 0;
  while (IsOp(".") || IsOp("[") || IsOp("(")) {
    RETURN_IF_ERROR(CheckChain(&chain));
    if (IsOp("(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    }
  }
  return node;
}

StatusOr<ExprPtr> ExpressionParser::ParseFilterExpr(ExprPtr node) {
  int chain = 0;
  while (true) {
    RETURN_IF_ERROR(CheckChain(&chain));
    if (IsOp("|")) {
      ASSIGN_OR_RETURN(node, ParseFilter(std::move(node), false));
    } else if (IsName("is")) {
      ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (IsOp("(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

StatusOr<ExprPtr> ExpressionParser::ParseSubscript(ExprPtr node) {
  const int line = Current().line;
  if (SkipOp(".")) {
    const Token& attr = Current();
    if (attr.type == TokenType::kName) {
      auto get = MakeExpr(ExprKind::kGetAttr, line);
      get->target = std::move(node);
      get->name = attr.text;
      Next();
      return get;
    }
    if (attr.type != TokenType::kInteger) return Fail("expected name or number", attr.line);
    auto get = MakeExpr(ExprKind::kGetItem, line);
    get->target = std::move(node);
    auto key = MakeExpr(ExprKind::kConst, attr.line);
    key->constant = Value::Int(attr.int_value);
    get->args.push_back(std::move(key));
    Next();
    return get;
  }
  RETURN_IF_ERROR(ExpectOp("["));
  std::vector<ExprPtr> args;
  while (!IsOp("]")) {
    if (!args.empty()) RETURN_IF_ERROR(ExpectOp(","));
    ASSIGN_OR_RETURN(ExprPtr arg, ParseSubscribed());
    args.push_back(std::move(arg));
  }
  RETURN_IF_ERROR(ExpectOp("]"));
  auto get = MakeExpr(ExprKind::kGetItem, line);
  get->target = std::move(node);
  if (args.size() == 1) {
    get->args.push_back(std::move(args[0]));
  } else {
    auto tuple = MakeExpr(ExprKind::kTuple, line);
    tuple->args = std::move(args);
    get->args.push_back(std::move(tuple));
  }
  return get;
}

StatusOr<ExprPtr> ExpressionParser::ParseSubscribed() {
  const int line = Current().line;
  std::vector<ExprPtr> args;
  if (SkipOp(":")) {
    args.push_back(nullptr);
  } else {
    ASSIGN_OR_RETURN(ExprPtr node, ParseExpression(true));
    if (!IsOp(":")) return node;
    Next();
    args.push_back(std::move(node));
  }
  if (IsOp(":") || IsOp("]") || IsOp(",")) {
    args.push_back(nullptr);
  } else {
    ASSIGN_OR_RETURN(ExprPtr stop, ParseExpression(true));
    args.push_back(std::move(stop));
  }
  if (SkipOp(":") && !IsOp("]") && !IsOp(",")) {
    ASSIGN_OR_RETURN(ExprPtr step, ParseExpression(true));
    args.push_back(std::move(step));
  } else {
    args.push_back(nullptr);
  }
  auto slice = MakeExpr(ExprKind::kSlice, line);
  slice->args = std::move(args);
  return slice;
}

// Fills args/kwargs/dyn_args/dyn_kwargs of `node` from "( ... )".
Status ExpressionParser::ParseCallArgs(Expr* node) {
  const int line = Current().line;
  RETURN_IF_ERROR(ExpectOp("("));
  bool require_comma = false;
  auto ensure = [&](bool ok) -> Status {
    return ok ? Status::Ok() : Fail("invalid syntax for function call expression", line);
  };
  while (!IsOp(")")) {
    if (require_comma) {
      RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
    }
    if (IsOp("*")) {
      RETURN_IF_ERROR(ensure(!node->dyn_args && !node->dyn_kwargs));
      Next();
      ASSIGN_OR_RETURN(node->dyn_args, ParseExpression(true));
    } else if (IsOp("**")) {
      RETURN_IF_ERROR(ensure(!node->dyn_kwargs));
      Next();
      ASSIGN_OR_RETURN(node->dyn_kwargs, ParseExpression(true));
    } else if (Current().type == TokenType::kName && Look().type == TokenType::kOperator &&
               Look().text == "=") {
      RETURN_IF_ERROR(ensure(!node->dyn_kwargs));
      std::string key = Current().text;
      Next();
      Next();
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      node->kwargs.emplace_back(std::move(key), std::move(value));
    } else {
      RETURN_IF_ERROR(ensure(!node->dyn_args && !node->dyn_kwargs && node->kwargs.empty()));
      ASSIGN_OR_RETURN(ExprPtr arg, ParseExpression(true));
      node->args.push_back(std::move(arg));
    }
    require_comma = true;
  }
  return ExpectOp(")");
}

StatusOr<ExprPtr> ExpressionParser::ParseCall(ExprPtr node) {
  auto call = MakeExpr(ExprKind::kCall, Current().line);
  call->target = std::move(node);
  RETURN_IF_ERROR(ParseCallArgs(call.get()));
  return call;
}

StatusOr<std::string> ExpressionParser::ParseDottedName() {
  ASSIGN_OR_RETURN(std::string name, ExpectName());
  while (SkipOp(".")) {
    ASSIGN_OR_RETURN(std::string part, ExpectName());
    name += "." + part;
  }
  return name;
}

StatusOr<ExprPtr> ExpressionParser::ParseFilter(ExprPtr node, bool start_inline) {
  int chain = 0;
  while (IsOp("|") || start_inline) {
    RETURN_IF_ERROR(CheckChain(&chain));
    if (!start_inline) Next();
    start_inline = false;
    const int line = Current().line;
    ASSIGN_OR_RETURN(std::string name, ParseDottedName());
    if (!IsKnownFilter(name)) return Fail("No filter named '" + name + "'.", line);
    auto filter = MakeExpr(ExprKind::kFilter, line);
    filter->name = std::move(name);
    filter->target = std::move(node);
    if (IsOp("(")) RETURN_IF_ERROR(ParseCallArgs(filter.get()));
    node = std::move(filter);
  }
  return node;
}

StatusOr<ExprPtr> ExpressionParser::ParseTest(ExprPtr node) {
  const int line = Current().line;
  Next();  // "is"
  const bool negated = SkipName("not");
  ASSIGN_OR_RETURN(std::string name, ParseDottedName());
  if (!IsKnownTest(name)) return Fail("No test named '" + name + "'.", line);
  auto test = MakeExpr(ExprKind::kTest, line);
  test->name = std::move(name);
  test->target = std::move(node);
  const Token& t = Current();
  const bool arg_start = t.type == TokenType::kName || t.type == TokenType::kString ||
                         t.type == TokenType::kInteger || t.type == TokenType::kFloat ||
                         IsOp("[") || IsOp("{");
  if (IsOp("(")) {
    RETURN_IF_ERROR(ParseCallArgs(test.get()));
  } else if (arg_start && !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) return Fail("You cannot chain multiple tests with is");
    ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    test->args.push_back(std::move(arg));
  }
  if (!negated) return test;
  auto neg = MakeExpr(ExprKind::kNot, line);
  neg->target = std::move(test);
  return neg;
}

}  // namespace pagellm::jinja
