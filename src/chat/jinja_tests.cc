// jinja2's built-in tests (`x is defined`, `x is divisibleby 3`, ...).
#include <string>

#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"
#include "chat/python_text.h"
#include "chat/value_ops.h"

namespace pagellm::jinja {
namespace {

using TestFn = StatusOr<bool> (*)(Interpreter&, const Value&, const CallArgs&);

StatusOr<Value> OneArg(const char* name, const CallArgs& a) {
  ASSIGN_OR_RETURN(auto b, BindArgs(name, a, {"other"}));
  if (!b[0]) return InvalidArgumentError(std::string(name) + "() missing 1 required argument");
  return *b[0];
}

Status NoArgs(const char* name, const CallArgs& a) {
  return BindArgs(name, a, {}).status();
}

#define SIMPLE_TEST(fn, name, expr)                                    \
  StatusOr<bool> fn(Interpreter&, const Value& v, const CallArgs& a) { \
    RETURN_IF_ERROR(NoArgs(name, a));                                  \
    return (expr);                                                     \
  }

SIMPLE_TEST(Defined, "defined", !v.is_undefined())
SIMPLE_TEST(Undefined, "undefined", v.is_undefined())
SIMPLE_TEST(None, "none", v.is_none())
SIMPLE_TEST(Boolean, "boolean", v.is_bool())
SIMPLE_TEST(True, "true", v.is_bool() && v.bool_value())
SIMPLE_TEST(False, "false", v.is_bool() && !v.bool_value())
SIMPLE_TEST(Integer, "integer", v.is_int())
SIMPLE_TEST(Float, "float", v.is_float())
SIMPLE_TEST(Number, "number", v.is_number())
SIMPLE_TEST(String, "string", v.is_string())
SIMPLE_TEST(Mapping, "mapping", v.is_dict())
SIMPLE_TEST(Callable, "callable", v.is_object() && v.object()->IsCallable())
SIMPLE_TEST(Escaped, "escaped", false)
// Strings, lists, tuples and dicts have len() and __getitem__; so does jinja2's Undefined.
SIMPLE_TEST(Sequence, "sequence",
            v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined())
SIMPLE_TEST(Iterable, "iterable",
            v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined() ||
                (v.is_object() && v.object()->TypeName() == "generator"))
SIMPLE_TEST(Lower, "lower", PyLower(PyStr(v)) == PyStr(v) && PyUpper(PyStr(v)) != PyStr(v))
SIMPLE_TEST(Upper, "upper", PyUpper(PyStr(v)) == PyStr(v) && PyLower(PyStr(v)) != PyStr(v))

StatusOr<bool> Parity(const Value& v, const CallArgs& a, const char* name, int64_t want) {
  RETURN_IF_ERROR(NoArgs(name, a));
  ASSIGN_OR_RETURN(Value m, PyBinary(BinaryOp::kMod, v, Value::Int(2)));
  return PyEquals(m, Value::Int(want));
}
StatusOr<bool> Odd(Interpreter&, const Value& v, const CallArgs& a) {
  return Parity(v, a, "odd", 1);
}
StatusOr<bool> Even(Interpreter&, const Value& v, const CallArgs& a) {
  return Parity(v, a, "even", 0);
}

StatusOr<bool> DivisibleBy(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(auto b, BindArgs("divisibleby", a, {"num"}));
  if (!b[0]) return InvalidArgumentError("divisibleby() missing 1 required argument");
  ASSIGN_OR_RETURN(Value m, PyBinary(BinaryOp::kMod, v, *b[0]));
  return PyEquals(m, Value::Int(0));
}

template <CompareOp op>
StatusOr<bool> Compare(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Value other, OneArg("compare", a));
  return PyCompare(op, v, other);
}

StatusOr<bool> In(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Value seq, OneArg("in", a));
  return PyContains(seq, v);
}

// Python's `is`: singletons and small values by value, containers and objects by identity.
StatusOr<bool> SameAs(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Value other, OneArg("sameas", a));
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kUndefined:
      return v.is_none();
    case Value::Kind::kBool:
    case Value::Kind::kInt:
      return v.int_value() == other.int_value();
    case Value::Kind::kFloat:
      return false;
    default:
      return v.identity() == other.identity();
  }
}

StatusOr<bool> IsFilter(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(NoArgs("filter", a));
  return v.is_string() && IsKnownFilter(v.str());
}

StatusOr<bool> IsTest(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(NoArgs("test", a));
  return v.is_string() && IsKnownTest(v.str());
}

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"!=", Compare<CompareOp::kNe>},
    {"<", Compare<CompareOp::kLt>},
    {"<=", Compare<CompareOp::kLe>},
    {"==", Compare<CompareOp::kEq>},
    {">", Compare<CompareOp::kGt>},
    {">=", Compare<CompareOp::kGe>},
    {"boolean", Boolean},
    {"callable", Callable},
    {"defined", Defined},
    {"divisibleby", DivisibleBy},
    {"eq", Compare<CompareOp::kEq>},
    {"equalto", Compare<CompareOp::kEq>},
    {"escaped", Escaped},
    {"even", Even},
    {"false", False},
    {"filter", IsFilter},
    {"float", Float},
    {"ge", Compare<CompareOp::kGe>},
    {"greaterthan", Compare<CompareOp::kGt>},
    {"gt", Compare<CompareOp::kGt>},
    {"in", In},
    {"integer", Integer},
    {"iterable", Iterable},
    {"le", Compare<CompareOp::kLe>},
    {"lessthan", Compare<CompareOp::kLt>},
    {"lower", Lower},
    {"lt", Compare<CompareOp::kLt>},
    {"mapping", Mapping},
    {"ne", Compare<CompareOp::kNe>},
    {"none", None},
    {"number", Number},
    {"odd", Odd},
    {"sameas", SameAs},
    {"sequence", Sequence},
    {"string", String},
    {"test", IsTest},
    {"true", True},
    {"undefined", Undefined},
    {"upper", Upper},
};

const TestEntry* FindTest(std::string_view name) {
  for (const TestEntry& e : kTests) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

}  // namespace

bool IsKnownTest(std::string_view name) {
  return FindTest(name) != nullptr;
}

StatusOr<bool> CallTest(Interpreter& interp, const std::string& name, const Value& input,
                        const CallArgs& args) {
  const TestEntry* e = FindTest(name);
  if (!e) return InvalidArgumentError("No test named '" + name + "'.");
  RETURN_IF_ERROR(interp.Tick());
  return e->fn(interp, input, args);
}

}  // namespace pagellm::jinja
