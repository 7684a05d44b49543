// Abstract syntax tree of a parsed Jinja template: expressions (Expr) and statements (Stmt),
// mirroring the node types of jinja2.nodes that chat templates use.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"
#include "chat/value_ops.h"

namespace pagellm::jinja {

enum class ExprKind {
  kConst,     // constant
  kName,      // name
  kNSRef,     // name.attr as an assignment target ({% set ns.x = ... %})
  kList,      // args: items
  kTuple,     // args: items
  kDict,      // args: key0, value0, key1, value1, ...
  kGetAttr,   // target.name
  kGetItem,   // target[args[0]]
  kSlice,     // args: start, stop, step (each may be null); only as a kGetItem key
  kCall,      // target(args, kwargs, *dyn_args, **dyn_kwargs)
  kFilter,    // target|name(args...); target is null inside {% filter %} / {% set %} blocks
  kTest,      // target is name(args...)
  kNeg,       // -target
  kPos,       // +target
  kNot,       // not target
  kBinary,    // args[0] binary_op args[1]
  kConcat,    // args[0] ~ args[1] ~ ...
  kCompare,   // args[0] compare_ops[0] args[1] compare_ops[1] args[2] ...
  kAnd,       // args[0] and args[1]
  kOr,        // args[0] or args[1]
  kCondExpr,  // args[1] if args[0] else args[2] (args[2] may be null)
};

enum class CompareKind { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kConst;
  int line = 0;
  Value constant;
  std::string name;  // kName / kNSRef variable, kGetAttr / kNSRef attribute, filter / test name
  std::string attr;  // kNSRef attribute
  BinaryOp binary_op = BinaryOp::kAdd;
  std::vector<CompareKind> compare_ops;
  ExprPtr target;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr dyn_args;
  ExprPtr dyn_kwargs;
};

enum class StmtKind {
  kText,         // text
  kPrint,        // {{ expr }}
  kIf,           // branches, else_body
  kFor,          // for target in expr [if cond] [recursive]: body, else_body
  kSet,          // set target = expr
  kSetBlock,     // set target [| filters]: body endset (expr: the filter chain or null)
  kMacro,        // macro name(params=defaults): body
  kCallBlock,    // call(params) expr: body
  kFilterBlock,  // filter expr: body
  kWith,         // with targets = values: body
  kScope,        // a block rendered as-is ({% generation %}, {% autoescape %})
  kBreak,
  kContinue,
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr target;
  ExprPtr cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  bool recursive = false;
  std::string name;
  std::vector<std::string> params;
  // Defaults of the last defaults.size() params.
  std::vector<ExprPtr> defaults;
  std::vector<ExprPtr> targets;
  std::vector<ExprPtr> values;
};

}  // namespace pagellm::jinja
