// jinja2's built-in filters (and transformers' tojson), with jinja2's argument names,
// defaults and Python semantics: string filters convert their input with str() first, lazy
// filters return single-use generators, sort/unique/min/max ignore case unless asked not to.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "chat/jinja_filter_util.h"
#include "chat/python_json.h"

namespace pagellm::jinja {
namespace filters {
namespace {

// --- string filters ------------------------------------------------------------------------------

StatusOr<Value> Upper(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("upper", a, {}).status());
  return Value::String(PyUpper(PyStr(v)));
}
StatusOr<Value> Lower(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("lower", a, {}).status());
  return Value::String(PyLower(PyStr(v)));
}
StatusOr<Value> Capitalize(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("capitalize", a, {}).status());
  return Value::String(PyCapitalize(PyStr(v)));
}

// jinja2's title: upper-cases the first character after each run of [-\s({\[<].
StatusOr<Value> Title(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("title", a, {}).status());
  auto is_sep = [](char32_t c) {
    return IsPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
  };
  std::string out;
  bool start = true;
  for (char32_t cp : DecodeCodepoints(PyStr(v))) {
    if (is_sep(cp)) {
      AppendCodepoint(cp, &out);
      start = true;
    } else {
      AppendCodepoint(start ? PyToUpper(cp) : PyToLower(cp), &out);
      start = false;
    }
  }
  return Value::String(std::move(out));
}

StatusOr<Value> Trim(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("trim", a, {"chars"}));
  std::optional<std::string> chars;
  if (b[0] && !b[0]->is_none()) {
    if (!b[0]->is_string()) return InvalidArgumentError("strip arg must be None or str");
    chars = b[0]->str();
  }
  return Value::String(PyStrip(PyStr(v), StripSide::kBoth, chars));
}

StatusOr<Value> Replace(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("replace", a, {"old", "new", "count"}));
  if (!b[0] || !b[1]) return InvalidArgumentError("replace() missing required arguments");
  int64_t count = -1;
  if (b[2] && !b[2]->is_none()) {
    ASSIGN_OR_RETURN(count, IntParam(b[2], -1, "count"));
  }
  std::string out = PyReplace(PyStr(v), PyStr(*b[0]), PyStr(*b[1]), count);
  if (out.size() > kMaxStringBytes) return TooLarge();
  return Value::String(std::move(out));
}

StatusOr<Value> StringFilter(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("string", a, {}).status());
  return Value::String(PyStr(v));
}

StatusOr<Value> Escape(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("escape", a, {}).status());
  std::string out;
  for (char c : PyStr(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return Value::String(std::move(out));
}

StatusOr<Value> Center(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("center", a, {"width"}));
  ASSIGN_OR_RETURN(int64_t width, IntParam(b[0], 80, "width"));
  std::string s = PyStr(v);
  int64_t len = static_cast<int64_t>(CodepointCount(s));
  if (width <= len) return Value::String(s);
  if (width > static_cast<int64_t>(kMaxStringBytes)) return TooLarge();
  int64_t marg = width - len;
  int64_t left = marg / 2 + (marg & width & 1);
  return Value::String(std::string(left, ' ') + s + std::string(marg - left, ' '));
}

StatusOr<Value> Indent(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("indent", a, {"width", "first", "blank"}));
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_string()) return InvalidArgumentError("indent() expects a string");
  std::string indention;
  if (b[0] && b[0]->is_string()) {
    indention = b[0]->str();
  } else {
    ASSIGN_OR_RETURN(int64_t width, IntParam(b[0], 4, "width"));
    if (width > 4096) return TooLarge();
    indention = std::string(std::max<int64_t>(width, 0), ' ');
  }
  std::vector<std::string> lines = PySplitLines(v.str() + "\n", false);
  std::string out;
  if (Flag(b[2], false)) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n" + indention;
      out += lines[i];
    }
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += indention;
      out += lines[i];
      if (out.size() > kMaxStringBytes) return TooLarge();
    }
  }
  if (Flag(b[1], false)) out = indention + out;
  return Value::String(std::move(out));
}

StatusOr<Value> Truncate(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("truncate", a, {"length", "killwords", "end", "leeway"}));
  ASSIGN_OR_RETURN(int64_t length, IntParam(b[0], 255, "length"));
  std::string end = b[2] ? PyStr(*b[2]) : "...";
  ASSIGN_OR_RETURN(int64_t leeway,
                   IntParam(b[3] && !b[3]->is_none() ? b[3] : std::nullopt, 5, "leeway"));
  if (!v.is_string()) {
    // Python measures any sized value and returns it unchanged when short enough; slicing a
    // long non-string then fails on the `+ end`.
    ASSIGN_OR_RETURN(int64_t n, PyLen(v));
    if (n <= length + leeway) return v;
    return InvalidArgumentError("can only concatenate " + v.TypeName() + " (not \"str\") to " +
                                v.TypeName());
  }
  std::u32string s = DecodeCodepoints(v.str());
  int64_t end_len = static_cast<int64_t>(CodepointCount(end));
  if (length < end_len)
    return InvalidArgumentError("expected length >= " + std::to_string(end_len));
  if (leeway < 0) return InvalidArgumentError("expected leeway >= 0");
  if (static_cast<int64_t>(s.size()) <= length + leeway) return Value::String(EncodeCodepoints(s));
  std::string head = EncodeCodepoints(std::u32string_view(s).substr(0, length - end_len));
  if (Flag(b[1], false)) return Value::String(head + end);
  std::vector<std::string> parts = PyRSplit(head, std::string(" "), 1);
  return Value::String(parts[0] + end);
}

StatusOr<Value> WordCount(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("wordcount", a, {}).status());
  int64_t words = 0;
  bool in_word = false;
  for (char32_t cp : DecodeCodepoints(PyStr(v))) {
    bool word_char = IsPyAlnum(cp) || cp == '_';
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::Int(words);
}

StatusOr<Value> Format(Interpreter&, const Value& v, const CallArgs& a) {
  if (!a.positional.empty() && !a.keyword.empty()) {
    return InvalidArgumentError("can't handle positional and keyword arguments at the same time");
  }
  if (!a.keyword.empty()) return UnimplementedError("format() with keyword arguments");
  ASSIGN_OR_RETURN(std::string out, PyPercentFormat(PyStr(v), Value::Tuple(a.positional)));
  return Value::String(std::move(out));
}

StatusOr<Value> ToJson(Interpreter&, const Value& v, const CallArgs& a) {
  // transformers: json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
  // sort_keys=sort_keys).
  ASSIGN_OR_RETURN(Args b,
                   BindArgs("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  if (Flag(b[0], false)) return UnimplementedError("tojson(ensure_ascii=True) is not supported");
  JsonDumpOptions opts;
  if (b[1] && !b[1]->is_none()) {
    if (b[1]->is_string()) {
      opts.indent = b[1]->str();
    } else {
      ASSIGN_OR_RETURN(int64_t n, IntParam(b[1], 0, "indent"));
      if (n > 4096) return TooLarge();
      opts.indent = std::string(std::max<int64_t>(n, 0), ' ');
    }
  }
  if (b[2] && !b[2]->is_none()) {
    if (!b[2]->is_sequence() || b[2]->items().size() != 2 || !b[2]->items()[0].is_string() ||
        !b[2]->items()[1].is_string()) {
      return InvalidArgumentError("tojson separators must be a pair of strings");
    }
    opts.item_separator = b[2]->items()[0].str();
    opts.key_separator = b[2]->items()[1].str();
  }
  opts.sort_keys = Flag(b[3], false);
  ASSIGN_OR_RETURN(std::string out, PyJsonDumps(v, opts));
  return Value::String(std::move(out));
}

// --- conversions -------------------------------------------------------------------------------

StatusOr<Value> Int(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("int", a, {"default", "base"}));
  Value fallback = b[0] ? *b[0] : Value::Int(0);
  ASSIGN_OR_RETURN(int64_t base, IntParam(b[1], 10, "base"));
  // int(Undefined) raises UndefinedError, which the filter does not catch.
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_integral()) return Value::Int(v.int_value());
  auto from_float = [&](double d) -> StatusOr<Value> {
    if (std::isnan(d)) return fallback;
    if (std::isinf(d)) return OutOfRangeError("cannot convert float infinity to integer");
    if (std::fabs(d) >= 9.2e18) return TooLarge();
    return Value::Int(static_cast<int64_t>(d));
  };
  if (v.is_float()) return from_float(v.float_value());
  if (v.is_string()) {
    if (auto n = ParsePyInt(v.str(), static_cast<int>(base))) return Value::Int(*n);
    // jinja2's quirk: "42.23"|int is 42.
    if (auto d = ParsePyFloat(v.str())) return from_float(*d);
  }
  return fallback;
}

StatusOr<Value> Float(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("float", a, {"default"}));
  Value fallback = b[0] ? *b[0] : Value::Float(0.0);
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_number()) return Value::Float(v.AsDouble());
  if (v.is_string()) {
    if (auto d = ParsePyFloat(v.str())) return Value::Float(*d);
  }
  return fallback;
}

StatusOr<Value> List(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("list", a, {}).status());
  ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(v));
  return Value::List(std::move(items));
}

StatusOr<Value> Items(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("items", a, {}).status());
  if (v.is_undefined()) return Gen({});
  if (!v.is_dict()) return InvalidArgumentError("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [key, value] : v.dict().entries()) out.push_back(Value::Tuple({key, value}));
  return Gen(std::move(out));
}

StatusOr<Value> Safe(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("safe", a, {}).status());
  return Value::String(PyStr(v));
}

// --- sequences ---------------------------------------------------------------------------------

StatusOr<Value> Length(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("length", a, {}).status());
  ASSIGN_OR_RETURN(int64_t n, PyLen(v));
  return Value::Int(n);
}

StatusOr<Value> First(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("first", a, {}).status());
  ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(v));
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return items.front();
}

StatusOr<Value> Last(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("last", a, {}).status());
  if (v.is_object()) return InvalidArgumentError("'generator' object is not reversible");
  ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(v));
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

StatusOr<Value> Join(Interpreter& interp, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("join", a, {"d", "attribute"}));
  std::string sep = b[0] ? PyStr(*b[0]) : "";
  ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(v));
  AttrGetter get(interp, b[1], false);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    ASSIGN_OR_RETURN(Value item, get(items[i]));
    out += PyStr(item);
    if (out.size() > kMaxStringBytes) return TooLarge();
  }
  return Value::String(std::move(out));
}

StatusOr<Value> Default(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("default", a, {"default_value", "boolean"}));
  const bool use_default = v.is_undefined() || (Flag(b[1], false) && !v.Truthy());
  if (!use_default) return v;
  return b[0] ? *b[0] : Value::String("");
}

StatusOr<Value> Reverse(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("reverse", a, {}).status());
  if (v.is_string()) {
    std::u32string cps = DecodeCodepoints(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value::String(EncodeCodepoints(cps));
  }
  ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(v));
  std::reverse(items.begin(), items.end());
  if (v.is_object()) return Value::List(std::move(items));
  return Gen(std::move(items));
}

// --- numbers -----------------------------------------------------------------------------------

StatusOr<Value> Abs(Interpreter&, const Value& v, const CallArgs& a) {
  RETURN_IF_ERROR(BindArgs("abs", a, {}).status());
  if (v.is_integral()) {
    if (v.int_value() == INT64_MIN) return TooLarge();
    return Value::Int(v.int_value() < 0 ? -v.int_value() : v.int_value());
  }
  if (v.is_float()) return Value::Float(std::fabs(v.float_value()));
  if (v.is_undefined()) return UndefinedError(v);
  return InvalidArgumentError("bad operand type for abs(): '" + v.TypeName() + "'");
}

StatusOr<Value> Round(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("round", a, {"precision", "method"}));
  ASSIGN_OR_RETURN(int64_t precision, IntParam(b[0], 0, "precision"));
  std::string method = b[1] ? PyStr(*b[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    return InvalidArgumentError("method must be common, ceil or floor");
  }
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_number()) {
    return InvalidArgumentError("type " + v.TypeName() + " doesn't define __round__ method");
  }
  if (method == "common") {
    if (v.is_integral() && precision >= 0) return Value::Int(v.int_value());
    double x = v.AsDouble();
    if (!std::isfinite(x)) return Value::Float(x);
    if (precision >= 0 && precision <= 300) {
      // printf rounds the exact binary value half-to-even, exactly as Python's round().
      char buf[512];
      std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);
      return Value::Float(std::strtod(buf, nullptr));
    }
    if (precision > 300) return Value::Float(x);
    double scale = std::pow(10.0, static_cast<double>(-precision));
    double r = std::nearbyint(x / scale) * scale;
    if (v.is_integral()) return Value::Int(static_cast<int64_t>(r));
    return Value::Float(r);
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double y = v.AsDouble() * scale;
  return Value::Float((method == "ceil" ? std::ceil(y) : std::floor(y)) / scale);
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", Abs},
    {"attr", Attr},
    {"batch", Batch},
    {"capitalize", Capitalize},
    {"center", Center},
    {"count", Length},
    {"d", Default},
    {"default", Default},
    {"dictsort", DictSort},
    {"e", Escape},
    {"escape", Escape},
    {"first", First},
    {"float", Float},
    {"forceescape", Escape},
    {"format", Format},
    {"groupby", GroupBy},
    {"indent", Indent},
    {"int", Int},
    {"items", Items},
    {"join", Join},
    {"last", Last},
    {"length", Length},
    {"list", List},
    {"lower", Lower},
    {"map", Map},
    {"max", Max},
    {"min", Min},
    {"reject", Reject},
    {"rejectattr", RejectAttr},
    {"replace", Replace},
    {"reverse", Reverse},
    {"round", Round},
    {"safe", Safe},
    {"select", Select},
    {"selectattr", SelectAttr},
    {"slice", Slice},
    {"sort", Sort},
    {"string", StringFilter},
    {"sum", Sum},
    {"title", Title},
    {"tojson", ToJson},
    {"trim", Trim},
    {"truncate", Truncate},
    {"unique", Unique},
    {"upper", Upper},
    {"wordcount", WordCount},
};

const FilterEntry* FindFilter(std::string_view name) {
  for (const FilterEntry& e : kFilters) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

}  // namespace
}  // namespace filters

using filters::FilterEntry;
using filters::FindFilter;

bool IsKnownFilter(std::string_view name) {
  return FindFilter(name) != nullptr;
}

StatusOr<Value> CallFilter(Interpreter& interp, const std::string& name, const Value& input,
                           const CallArgs& args) {
  const FilterEntry* e = FindFilter(name);
  if (!e) return InvalidArgumentError("No filter named '" + name + "'.");
  RETURN_IF_ERROR(interp.Tick());
  return e->fn(interp, input, args);
}

}  // namespace pagellm::jinja
