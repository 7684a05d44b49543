#include "chat/value_ops.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/python_text.h"

namespace pagellm::jinja {
namespace {

Status TypeError(std::string message) {
  return InvalidArgumentError(std::move(message));
}

const char* OpSymbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "//";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kPow:
      return "** or pow()";
  }
  return "?";
}

const char* CompareSymbol(CompareOp op) {
  switch (op) {
    case CompareOp::kEq:
      return "==";
    case CompareOp::kNe:
      return "!=";
    case CompareOp::kLt:
      return "<";
    case CompareOp::kLe:
      return "<=";
    case CompareOp::kGt:
      return ">";
    case CompareOp::kGe:
      return ">=";
  }
  return "?";
}

Status Unsupported(BinaryOp op, const Value& a, const Value& b) {
  return TypeError(std::string("unsupported operand type(s) for ") + OpSymbol(op) + ": '" +
                   a.TypeName() + "' and '" + b.TypeName() + "'");
}

Status TooLarge() {
  return ResourceExhaustedError("value too large for a template");
}

StatusOr<Value> Repeat(const Value& seq, int64_t times) {
  if (times <= 0) {
    if (seq.is_string()) return Value::String("");
    return seq.is_tuple() ? Value::Tuple({}) : Value::List({});
  }
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (!s.empty() && static_cast<uint64_t>(times) > kMaxStringBytes / s.size()) return TooLarge();
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value::String(std::move(out));
  }
  const auto& items = seq.items();
  if (!items.empty() && static_cast<uint64_t>(times) > kMaxSequenceItems / items.size()) {
    return TooLarge();
  }
  std::vector<Value> out;
  out.reserve(items.size() * static_cast<size_t>(times));
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

// CPython's float divmod, so // and % on floats round exactly as Python's do.
void FloatDivMod(double a, double b, double* floordiv, double* mod) {
  double m = std::fmod(a, b);
  double div = (a - m) / b;
  if (m != 0) {
    if ((b < 0) != (m < 0)) {
      m += b;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, b);
  }
  double fd;
  if (div != 0) {
    fd = std::floor(div);
    if (div - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, a / b);
  }
  *floordiv = fd;
  *mod = m;
}

StatusOr<Value> IntPow(int64_t base, int64_t exp) {
  int64_t result = 1;
  int64_t b = base;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, b, &result)) return TooLarge();
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(b, b, &b)) return TooLarge();
  }
  return Value::Int(result);
}

StatusOr<Value> NumericBinary(BinaryOp op, const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral() && op != BinaryOp::kDiv) {
    int64_t x = a.int_value(), y = b.int_value(), r = 0;
    switch (op) {
      case BinaryOp::kAdd:
        if (__builtin_add_overflow(x, y, &r)) return TooLarge();
        return Value::Int(r);
      case BinaryOp::kSub:
        if (__builtin_sub_overflow(x, y, &r)) return TooLarge();
        return Value::Int(r);
      case BinaryOp::kMul:
        if (__builtin_mul_overflow(x, y, &r)) return TooLarge();
        return Value::Int(r);
      case BinaryOp::kFloorDiv:
      case BinaryOp::kMod: {
        if (y == 0) return InvalidArgumentError("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) return TooLarge();
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          q -= 1;
          m += y;
        }
        return Value::Int(op == BinaryOp::kFloorDiv ? q : m);
      }
      case BinaryOp::kPow:
        if (y >= 0) return IntPow(x, y);
        if (x == 0) return InvalidArgumentError("0.0 cannot be raised to a negative power");
        return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
      case BinaryOp::kDiv:
        break;
    }
  }
  double x = a.AsDouble(), y = b.AsDouble();
  switch (op) {
    case BinaryOp::kAdd:
      return Value::Float(x + y);
    case BinaryOp::kSub:
      return Value::Float(x - y);
    case BinaryOp::kMul:
      return Value::Float(x * y);
    case BinaryOp::kDiv:
      if (y == 0) {
        return InvalidArgumentError(a.is_float() || b.is_float() ? "float division by zero"
                                                                 : "division by zero");
      }
      return Value::Float(x / y);
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod: {
      if (y == 0) {
        return InvalidArgumentError(op == BinaryOp::kMod ? "float modulo"
                                                         : "float floor division by zero");
      }
      double fd, m;
      FloatDivMod(x, y, &fd, &m);
      return Value::Float(op == BinaryOp::kFloorDiv ? fd : m);
    }
    case BinaryOp::kPow: {
      if (x == 0 && y < 0) {
        return InvalidArgumentError("0.0 cannot be raised to a negative power");
      }
      if (x < 0 && y != std::floor(y)) {
        return UnimplementedError("complex results are not supported");
      }
      double r = std::pow(x, y);
      if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) {
        return OutOfRangeError("(34, 'Numerical result out of range')");
      }
      return Value::Float(r);
    }
  }
  return Unsupported(op, a, b);
}

// Python's PySlice_AdjustIndices: clamps [start, stop) for a step.
StatusOr<std::vector<int64_t>> SliceIndices(int64_t len, const Value& start_v, const Value& stop_v,
                                            const Value& step_v) {
  auto as_index = [](const Value& v, std::optional<int64_t>* out) -> Status {
    if (v.is_none() || v.is_undefined()) return Status::Ok();
    if (!v.is_integral()) {
      return TypeError("slice indices must be integers or None or have an __index__ method");
    }
    *out = v.int_value();
    return Status::Ok();
  };
  std::optional<int64_t> start, stop, step;
  RETURN_IF_ERROR(as_index(start_v, &start));
  RETURN_IF_ERROR(as_index(stop_v, &stop));
  RETURN_IF_ERROR(as_index(step_v, &step));
  int64_t st = step.value_or(1);
  if (st == 0) return InvalidArgumentError("slice step cannot be zero");
  int64_t lo, hi;
  if (st > 0) {
    lo = start.value_or(0);
    hi = stop.value_or(len);
    if (lo < 0) lo = std::max<int64_t>(0, lo + len);
    if (hi < 0) hi = std::max<int64_t>(0, hi + len);
    lo = std::min(lo, len);
    hi = std::min(hi, len);
  } else {
    lo = start.value_or(len - 1);
    hi = stop.has_value() ? *stop : -1 - len;  // "past the beginning"
    if (start) {
      if (lo < 0) lo = std::max<int64_t>(-1, lo + len);
      lo = std::min(lo, len - 1);
    }
    if (stop) {
      if (hi < 0) hi = std::max<int64_t>(-1, hi + len);
      hi = std::min(hi, len - 1);
    } else {
      hi = -1;
    }
  }
  std::vector<int64_t> idx;
  if (st > 0) {
    for (int64_t i = lo; i < hi; i += st) idx.push_back(i);
  } else {
    for (int64_t i = lo; i > hi; i += st) idx.push_back(i);
  }
  return idx;
}

}  // namespace

Status UndefinedError(const Value& undefined) {
  const std::string& hint = undefined.undefined_hint();
  return InvalidArgumentError(hint.empty() ? "undefined value" : hint);
}

std::string PyStr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.bool_value() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.int_value());
    case Value::Kind::kFloat:
      return PyFloatRepr(v.float_value());
    case Value::Kind::kString:
      return v.str();
    case Value::Kind::kObject:
      return v.object()->Repr();
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kDict:
      return PyRepr(v);
  }
  return "";
}

std::string PyRepr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kString:
      return PyStringRepr(v.str());
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      std::string out = v.is_list() ? "[" : "(";
      const auto& items = v.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += PyRepr(items[i]);
      }
      if (v.is_tuple() && items.size() == 1) out += ",";
      out += v.is_list() ? "]" : ")";
      return out;
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, value] : v.dict().entries()) {
        if (!first) out += ", ";
        first = false;
        out += PyRepr(key) + ": " + PyRepr(value);
      }
      return out + "}";
    }
    default:
      return PyStr(v);
  }
}

bool PyEquals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.int_value() == b.int_value();
    return a.AsDouble() == b.AsDouble();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const auto &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!PyEquals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const ValueDict &x = a.dict(), &y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.entries()) {
        auto found = y.Find(key);
        if (!found.ok() || *found == nullptr || !PyEquals(value, **found)) return false;
      }
      return true;
    }
    case Value::Kind::kObject:
      return a.object() == b.object();
    default:
      return false;
  }
}

StatusOr<bool> PyCompare(CompareOp op, const Value& a, const Value& b) {
  if (op == CompareOp::kEq) return PyEquals(a, b);
  if (op == CompareOp::kNe) return !PyEquals(a, b);
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  auto fail = [&]() -> Status {
    return TypeError(std::string("'") + CompareSymbol(op) +
                     "' not supported between instances of '" + a.TypeName() + "' and '" +
                     b.TypeName() + "'");
  };
  int cmp = 0;
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) {
      cmp = a.int_value() < b.int_value() ? -1 : a.int_value() > b.int_value() ? 1 : 0;
    } else {
      double x = a.AsDouble(), y = b.AsDouble();
      if (std::isnan(x) || std::isnan(y)) return false;
      cmp = x < y ? -1 : x > y ? 1 : 0;
    }
  } else if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order, which is how Python orders str.
    int c = a.str().compare(b.str());
    cmp = c < 0 ? -1 : c > 0 ? 1 : 0;
  } else if (a.kind() == b.kind() && a.is_sequence()) {
    const auto &x = a.items(), &y = b.items();
    size_t i = 0;
    while (i < x.size() && i < y.size() && PyEquals(x[i], y[i])) ++i;
    if (i < x.size() && i < y.size()) return PyCompare(op, x[i], y[i]);
    cmp = x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  } else {
    return fail();
  }
  switch (op) {
    case CompareOp::kLt:
      return cmp < 0;
    case CompareOp::kLe:
      return cmp <= 0;
    case CompareOp::kGt:
      return cmp > 0;
    case CompareOp::kGe:
      return cmp >= 0;
    default:
      return fail();
  }
}

StatusOr<Value> PyBinary(BinaryOp op, const Value& a, const Value& b) {
  // str % x runs str.__mod__ first, which accepts an Undefined argument (as a mapping).
  if (op == BinaryOp::kMod && a.is_string() && b.is_undefined()) {
    ASSIGN_OR_RETURN(std::string s, PyPercentFormat(a.str(), b));
    return Value::String(std::move(s));
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number()) return NumericBinary(op, a, b);
  switch (op) {
    case BinaryOp::kAdd:
      if (a.is_string() && b.is_string()) {
        if (a.str().size() + b.str().size() > kMaxStringBytes) return TooLarge();
        return Value::String(a.str() + b.str());
      }
      if (a.kind() == b.kind() && a.is_sequence()) {
        if (a.items().size() + b.items().size() > kMaxSequenceItems) return TooLarge();
        std::vector<Value> out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return a.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
      }
      if (a.is_string() || a.is_sequence()) {
        return TypeError("can only concatenate " + a.TypeName() + " (not \"" + b.TypeName() +
                         "\") to " + a.TypeName());
      }
      break;
    case BinaryOp::kMul:
      if ((a.is_string() || a.is_sequence()) && b.is_integral()) return Repeat(a, b.int_value());
      if ((b.is_string() || b.is_sequence()) && a.is_integral()) return Repeat(b, a.int_value());
      if (a.is_string() || a.is_sequence() || b.is_string() || b.is_sequence()) {
        const Value& seq = (a.is_string() || a.is_sequence()) ? a : b;
        const Value& other = &seq == &a ? b : a;
        return TypeError("can't multiply sequence by non-int of type '" + other.TypeName() + "'");
      }
      break;
    case BinaryOp::kMod:
      if (a.is_string()) {
        ASSIGN_OR_RETURN(std::string s, PyPercentFormat(a.str(), b));
        return Value::String(std::move(s));
      }
      break;
    default:
      break;
  }
  return Unsupported(op, a, b);
}

StatusOr<Value> PyNegate(const Value& v) {
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_integral()) {
    if (v.int_value() == INT64_MIN) return TooLarge();
    return Value::Int(-v.int_value());
  }
  if (v.is_float()) return Value::Float(-v.float_value());
  return TypeError("bad operand type for unary -: '" + v.TypeName() + "'");
}

StatusOr<Value> PyPositive(const Value& v) {
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_integral()) return Value::Int(v.int_value());
  if (v.is_float()) return v;
  return TypeError("bad operand type for unary +: '" + v.TypeName() + "'");
}

StatusOr<int64_t> PyLen(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return int64_t{0};
    case Value::Kind::kString:
      return static_cast<int64_t>(CodepointCount(v.str()));
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return static_cast<int64_t>(v.items().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict().size());
    default:
      return TypeError("object of type '" + v.TypeName() + "' has no len()");
  }
}

StatusOr<std::vector<Value>> PyIterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return std::vector<Value>{};
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return v.items();
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().size());
      for (const auto& entry : v.dict().entries()) keys.push_back(entry.first);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (char32_t cp : DecodeCodepoints(v.str())) {
        std::string s;
        AppendCodepoint(cp, &s);
        chars.push_back(Value::String(std::move(s)));
      }
      return chars;
    }
    case Value::Kind::kObject:
      if (auto items = v.object()->Iterate()) return std::move(*items);
      return TypeError("'" + v.TypeName() + "' object is not iterable");
    default:
      return TypeError("'" + v.TypeName() + "' object is not iterable");
  }
}

StatusOr<bool> PyContains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        return TypeError("'in <string>' requires string as left operand, not " + item.TypeName());
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const Value& x : container.items()) {
        if (PyEquals(x, item)) return true;
      }
      return false;
    case Value::Kind::kDict: {
      ASSIGN_OR_RETURN(const Value* found, container.dict().Find(item));
      return found != nullptr;
    }
    case Value::Kind::kObject:
      if (auto items = container.object()->Iterate()) {
        for (const Value& x : *items) {
          if (PyEquals(x, item)) return true;
        }
        return false;
      }
      return TypeError("argument of type '" + container.TypeName() + "' is not iterable");
    default:
      return TypeError("argument of type '" + container.TypeName() + "' is not iterable");
  }
}

StatusOr<std::optional<Value>> PyGetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.is_dict()) {
    auto found = obj.dict().Find(key);
    if (!found.ok() || *found == nullptr) return std::optional<Value>();
    return std::optional<Value>(**found);
  }
  if ((obj.is_sequence() || obj.is_string()) && key.is_integral()) {
    int64_t i = key.int_value();
    if (obj.is_string()) {
      std::u32string cps = DecodeCodepoints(obj.str());
      int64_t n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return std::optional<Value>();
      std::string s;
      AppendCodepoint(cps[static_cast<size_t>(i)], &s);
      return std::optional<Value>(Value::String(std::move(s)));
    }
    int64_t n = static_cast<int64_t>(obj.items().size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return std::optional<Value>();
    return std::optional<Value>(obj.items()[static_cast<size_t>(i)]);
  }
  return std::optional<Value>();
}

StatusOr<Value> PySlice(const Value& obj, const Value& start, const Value& stop,
                        const Value& step) {
  // jinja2 compiles slices to plain Python subscripts, so failures are errors, not Undefined.
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.is_string()) {
    std::u32string cps = DecodeCodepoints(obj.str());
    ASSIGN_OR_RETURN(std::vector<int64_t> idx,
                     SliceIndices(static_cast<int64_t>(cps.size()), start, stop, step));
    std::u32string out;
    for (int64_t i : idx) out.push_back(cps[static_cast<size_t>(i)]);
    return Value::String(EncodeCodepoints(out));
  }
  if (obj.is_sequence()) {
    const auto& items = obj.items();
    ASSIGN_OR_RETURN(std::vector<int64_t> idx,
                     SliceIndices(static_cast<int64_t>(items.size()), start, stop, step));
    std::vector<Value> out;
    out.reserve(idx.size());
    for (int64_t i : idx) out.push_back(items[static_cast<size_t>(i)]);
    return obj.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
  }
  if (obj.is_dict()) return TypeError("unhashable type: 'slice'");
  return TypeError("'" + obj.TypeName() + "' object is not subscriptable");
}

StatusOr<std::string> PyPercentFormat(const std::string& fmt, const Value& args) {
  std::vector<Value> values = args.is_tuple() ? args.items() : std::vector<Value>{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) return InvalidArgumentError("incomplete format");
    if (fmt[i] == '%') {
      out.push_back('%');
      continue;
    }
    std::string spec = "%";
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos) {
      spec.push_back(fmt[i++]);
    }
    while (i < fmt.size() && ((fmt[i] >= '0' && fmt[i] <= '9') || fmt[i] == '.')) {
      spec.push_back(fmt[i++]);
    }
    if (i >= fmt.size()) return InvalidArgumentError("incomplete format");
    if (spec.size() > 12) return InvalidArgumentError("format specification too long");
    const char conv = fmt[i];
    if (next >= values.size()) return TypeError("not enough arguments for format string");
    const Value& v = values[next++];
    char buf[512];
    switch (conv) {
      case 's':
      case 'r': {
        std::string text = conv == 's' ? PyStr(v) : PyRepr(v);
        // Only a plain width is honoured on strings; precision there is unheard of in templates.
        size_t width =
            spec.size() > 1 ? std::strtoul(spec.c_str() + 1 + (spec[1] == '-'), nullptr, 10) : 0;
        size_t len = CodepointCount(text);
        if (len < width && width < 4096) {
          std::string pad(width - len, ' ');
          text = spec[1] == '-' ? text + pad : pad + text;
        }
        out += text;
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o': {
        if (!v.is_number()) {
          return TypeError(std::string("%") + conv + " format: a real number is required, not " +
                           v.TypeName());
        }
        long long n = v.is_float() ? static_cast<long long>(v.float_value()) : v.int_value();
        std::snprintf(buf, sizeof(buf), (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), n);
        out += buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!v.is_number()) {
          return TypeError("must be real number, not " + v.TypeName());
        }
        std::snprintf(buf, sizeof(buf), (spec + conv).c_str(), v.AsDouble());
        out += buf;
        break;
      }
      default:
        return InvalidArgumentError(std::string("unsupported format character '") + conv + "'");
    }
    if (out.size() > kMaxStringBytes) return TooLarge();
  }
  // Python only complains about unused arguments given as a tuple or a scalar; a list or
  // dict argument counts as a mapping and may go unused.
  if (next < values.size() &&
      !(next == 0 && (args.is_list() || args.is_dict() || args.is_undefined()))) {
    return TypeError("not all arguments converted during string formatting");
  }
  return out;
}

std::optional<int64_t> ParsePyInt(const std::string& text, int base) {
  std::string s = PyStrip(text, StripSide::kBoth);
  std::string digits;
  for (char c : s) {
    if (c != '_') digits.push_back(c);
  }
  if (digits.empty()) return std::nullopt;
  size_t pos = 0;
  bool neg = false;
  if (digits[0] == '+' || digits[0] == '-') {
    neg = digits[0] == '-';
    pos = 1;
  }
  if (base == 0 || base == 16 || base == 8 || base == 2) {
    if (digits.size() > pos + 1 && digits[pos] == '0') {
      char p = static_cast<char>(digits[pos + 1] | 0x20);
      int prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
      if (prefixed && (base == 0 || base == prefixed)) {
        base = prefixed;
        pos += 2;
      }
    }
    if (base == 0) base = 10;
  }
  if (pos >= digits.size()) return std::nullopt;
  int64_t value = 0;
  for (size_t i = pos; i < digits.size(); ++i) {
    char c = digits[i];
    int d = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'a' && c <= 'z') ? c - 'a' + 10
            : (c >= 'A' && c <= 'Z') ? c - 'A' + 10
                                     : 99;
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, d, &value)) {
      return std::nullopt;
    }
  }
  return neg ? -value : value;
}

std::optional<double> ParsePyFloat(const std::string& text) {
  std::string s = PyStrip(text, StripSide::kBoth);
  std::string clean;
  for (char c : s) {
    if (c != '_') clean.push_back(c);
  }
  if (clean.empty()) return std::nullopt;
  std::string lower = PyLower(clean);
  std::string body = lower[0] == '+' || lower[0] == '-' ? lower.substr(1) : lower;
  const double sign = lower[0] == '-' ? -1.0 : 1.0;
  if (body == "inf" || body == "infinity") return sign * HUGE_VAL;
  if (body == "nan") return std::nan("");
  // strtod also accepts hex floats and "infinity" spellings Python rejects; only digits,
  // one point and an exponent may reach it.
  for (char c : body) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == '+' || c == '-')) {
      return std::nullopt;
    }
  }
  errno = 0;
  char* end = nullptr;
  double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

}  // namespace pagellm::jinja
