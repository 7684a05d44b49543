// Expression evaluation of the Interpreter (statements are in jinja_interpreter.cc), with the
// attribute and item lookup rules of jinja2's sandbox.
#include <utility>

#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"
#include "chat/python_text.h"
#include "chat/value_ops.h"

namespace pagellm::jinja {
namespace {

std::string ObjectTypeRepr(const Value& obj) {
  if (obj.is_none()) return "None";
  return obj.TypeName() + " object";
}

Value MissingAttribute(const Value& obj, const std::string& name) {
  return Value::Undefined("'" + ObjectTypeRepr(obj) + "' has no attribute '" + name + "'");
}

Value UnsafeAttribute(const Value& obj, const std::string& name) {
  return Value::Undefined(
      "access to attribute '" + name + "' of '" + obj.TypeName() + "' object is unsafe.", true);
}

StatusOr<Value> MethodOrMissing(const Value& obj, const std::string& name, bool* found) {
  bool unsafe = false;
  *found = false;
  // Names starting with an underscore are private to the sandbox.
  if (!name.empty() && name[0] == '_') return Value();
  if (!HasMethod(obj, name, &unsafe)) return Value();
  *found = true;
  if (unsafe) return UnsafeAttribute(obj, name);
  return Value::FromObject(std::make_shared<NativeFunction>(
      name, obj,
      [](Interpreter& interp, const Value& self, const std::string& method, const CallArgs& args) {
        return CallMethod(interp, self, method, args);
      }));
}

}  // namespace

StatusOr<Value> Interpreter::GetAttr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.is_object()) {
    if (!name.empty() && name[0] == '_') return MissingAttribute(obj, name);
    if (auto v = obj.object()->GetAttr(name)) return *v;
    return MissingAttribute(obj, name);
  }
  // Python's getattr first: methods shadow dict keys of the same name.
  bool found = false;
  ASSIGN_OR_RETURN(Value method, MethodOrMissing(obj, name, &found));
  if (found) return method;
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().FindString(name)) return *v;
  }
  if (obj.is_number() && (name == "real" || name == "imag")) {
    if (name == "real") return obj.is_float() ? obj : Value::Int(obj.int_value());
    return obj.is_float() ? Value::Float(0.0) : Value::Int(0);
  }
  return MissingAttribute(obj, name);
}

StatusOr<Value> Interpreter::GetItem(const Value& obj, const Value& key) {
  if (obj.is_object()) {
    // Engine objects are not subscriptable; jinja2 then falls back to the attribute.
    if (key.is_string()) return GetAttr(obj, key.str());
    return Value::Undefined(ObjectTypeRepr(obj) + " has no element " + PyRepr(key));
  }
  ASSIGN_OR_RETURN(std::optional<Value> item, PyGetItem(obj, key));
  if (item) return *item;
  // jinja2 falls back to the attribute of that name (methods, numeric attributes).
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined(ObjectTypeRepr(obj) + " has no element " + PyRepr(key));
}

StatusOr<Value> Interpreter::CallValue(const Value& callee, const CallArgs& args) {
  if (callee.is_undefined()) return UndefinedError(callee);
  if (callee.is_object() && callee.object()->IsCallable()) {
    return callee.object()->Call(*this, args);
  }
  return InvalidArgumentError("'" + callee.TypeName() + "' object is not callable");
}

StatusOr<CallArgs> Interpreter::EvalArgs(const Expr& expr) {
  CallArgs args;
  for (const ExprPtr& arg : expr.args) {
    ASSIGN_OR_RETURN(Value v, Eval(*arg));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [key, arg] : expr.kwargs) {
    ASSIGN_OR_RETURN(Value v, Eval(*arg));
    args.keyword.emplace_back(key, std::move(v));
  }
  if (expr.dyn_args) {
    ASSIGN_OR_RETURN(Value v, Eval(*expr.dyn_args));
    ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(v));
    for (Value& item : items) args.positional.push_back(std::move(item));
  }
  if (expr.dyn_kwargs) {
    ASSIGN_OR_RETURN(Value v, Eval(*expr.dyn_kwargs));
    if (!v.is_dict()) {
      return InvalidArgumentError("argument after ** must be a mapping, not " + v.TypeName());
    }
    for (const auto& [key, value] : v.dict().entries()) {
      if (!key.is_string()) return InvalidArgumentError("keywords must be strings");
      args.keyword.emplace_back(key.str(), value);
    }
  }
  return args;
}

StatusOr<Value> Interpreter::ApplyFilterChain(const Expr& chain, const Value& input) {
  Value v = input;
  if (chain.target) {
    ASSIGN_OR_RETURN(v, ApplyFilterChain(*chain.target, input));
  }
  ASSIGN_OR_RETURN(CallArgs args, EvalArgs(chain));
  return CallFilter(*this, chain.name, v, args);
}

StatusOr<Value> Interpreter::Eval(const Expr& expr) {
  DepthGuard guard(this);
  RETURN_IF_ERROR(guard.Check());
  RETURN_IF_ERROR(Tick());
  auto result = EvalInner(expr);
  if (!result.ok()) return WithLine(result.status(), expr.line);
  if (result->nesting() > kMaxNesting) {
    return WithLine(ResourceExhaustedError("value nested too deeply"), expr.line);
  }
  return result;
}

StatusOr<Value> Interpreter::EvalCompare(const Expr& expr) {
  ASSIGN_OR_RETURN(Value left, Eval(*expr.args[0]));
  for (size_t i = 0; i < expr.compare_ops.size(); ++i) {
    ASSIGN_OR_RETURN(Value right, Eval(*expr.args[i + 1]));
    bool ok = false;
    switch (expr.compare_ops[i]) {
      case CompareKind::kIn:
      case CompareKind::kNotIn: {
        ASSIGN_OR_RETURN(bool in, PyContains(right, left));
        ok = (expr.compare_ops[i] == CompareKind::kIn) == in;
        break;
      }
      default: {
        static constexpr CompareOp kMap[] = {CompareOp::kEq, CompareOp::kNe, CompareOp::kLt,
                                             CompareOp::kLe, CompareOp::kGt, CompareOp::kGe};
        ASSIGN_OR_RETURN(ok, PyCompare(kMap[static_cast<int>(expr.compare_ops[i])], left, right));
      }
    }
    // Python chains comparisons with `and`: the first false one ends the chain.
    if (!ok) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

StatusOr<Value> Interpreter::EvalInner(const Expr& expr) {
  switch (expr.kind) {
    case ExprKind::kConst:
      return expr.constant;
    case ExprKind::kName:
      return Lookup(expr.name);
    case ExprKind::kNSRef:
      return InvalidArgumentError("namespace reference used as a value");
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(expr.args.size());
      for (const ExprPtr& e : expr.args) {
        ASSIGN_OR_RETURN(Value v, Eval(*e));
        items.push_back(std::move(v));
      }
      return expr.kind == ExprKind::kList ? Value::List(std::move(items))
                                          : Value::Tuple(std::move(items));
    }
    case ExprKind::kDict: {
      ValueDict dict;
      for (size_t i = 0; i + 1 < expr.args.size(); i += 2) {
        ASSIGN_OR_RETURN(Value key, Eval(*expr.args[i]));
        ASSIGN_OR_RETURN(Value value, Eval(*expr.args[i + 1]));
        RETURN_IF_ERROR(dict.Set(key, std::move(value)));
      }
      return Value::Dict(std::move(dict));
    }
    case ExprKind::kGetAttr: {
      ASSIGN_OR_RETURN(Value obj, Eval(*expr.target));
      return GetAttr(obj, expr.name);
    }
    case ExprKind::kGetItem: {
      ASSIGN_OR_RETURN(Value obj, Eval(*expr.target));
      const Expr& key = *expr.args[0];
      if (key.kind == ExprKind::kSlice) {
        Value bounds[3];
        for (int i = 0; i < 3; ++i) {
          if (key.args[i]) {
            ASSIGN_OR_RETURN(bounds[i], Eval(*key.args[i]));
          } else {
            bounds[i] = Value::None();
          }
        }
        return PySlice(obj, bounds[0], bounds[1], bounds[2]);
      }
      ASSIGN_OR_RETURN(Value k, Eval(key));
      return GetItem(obj, k);
    }
    case ExprKind::kSlice:
      return InvalidArgumentError("slice outside a subscript");
    case ExprKind::kCall: {
      ASSIGN_OR_RETURN(Value callee, Eval(*expr.target));
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr));
      return CallValue(callee, args);
    }
    case ExprKind::kFilter: {
      if (!expr.target) return InvalidArgumentError("filter without input");
      ASSIGN_OR_RETURN(Value input, Eval(*expr.target));
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr));
      return CallFilter(*this, expr.name, input, args);
    }
    case ExprKind::kTest: {
      ASSIGN_OR_RETURN(Value input, Eval(*expr.target));
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr));
      ASSIGN_OR_RETURN(bool result, CallTest(*this, expr.name, input, args));
      return Value::Bool(result);
    }
    case ExprKind::kNeg: {
      ASSIGN_OR_RETURN(Value v, Eval(*expr.target));
      return PyNegate(v);
    }
    case ExprKind::kPos: {
      ASSIGN_OR_RETURN(Value v, Eval(*expr.target));
      return PyPositive(v);
    }
    case ExprKind::kNot: {
      ASSIGN_OR_RETURN(Value v, Eval(*expr.target));
      return Value::Bool(!v.Truthy());
    }
    case ExprKind::kBinary: {
      ASSIGN_OR_RETURN(Value a, Eval(*expr.args[0]));
      ASSIGN_OR_RETURN(Value b, Eval(*expr.args[1]));
      return PyBinary(expr.binary_op, a, b);
    }
    case ExprKind::kConcat: {
      std::string out;
      for (const ExprPtr& e : expr.args) {
        ASSIGN_OR_RETURN(Value v, Eval(*e));
        out += PyStr(v);
        if (out.size() > kMaxStringBytes) {
          return ResourceExhaustedError("value too large for a template");
        }
      }
      return Value::String(std::move(out));
    }
    case ExprKind::kCompare:
      return EvalCompare(expr);
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      ASSIGN_OR_RETURN(Value left, Eval(*expr.args[0]));
      const bool short_circuit = expr.kind == ExprKind::kAnd ? !left.Truthy() : left.Truthy();
      if (short_circuit) return left;
      return Eval(*expr.args[1]);
    }
    case ExprKind::kCondExpr: {
      ASSIGN_OR_RETURN(Value test, Eval(*expr.args[0]));
      if (test.Truthy()) return Eval(*expr.args[1]);
      if (expr.args[2]) return Eval(*expr.args[2]);
      return Value::Undefined("the inline if-expression on line " + std::to_string(expr.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return InternalError("unknown expression");
}

}  // namespace pagellm::jinja
