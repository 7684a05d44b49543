// Python methods of str, dict, list and tuple as templates call them (content.strip(),
// message.get('x'), 'a,b'.split(',')...). Mutating methods exist but are flagged unsafe: the
// immutable sandbox that transformers uses refuses to call them.
#include <algorithm>
#include <string>

#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"
#include "chat/python_text.h"
#include "chat/value_ops.h"

namespace pagellm::jinja {
namespace {

constexpr std::string_view kStrMethods[] = {
    "capitalize", "casefold",     "center",       "count",   "endswith", "find",
    "format",     "index",        "isalnum",      "isalpha", "isdigit",  "islower",
    "isspace",    "isupper",      "join",         "ljust",   "lower",    "lstrip",
    "partition",  "removeprefix", "removesuffix", "replace", "rfind",    "rindex",
    "rjust",      "rpartition",   "rsplit",       "rstrip",  "split",    "splitlines",
    "startswith", "strip",        "swapcase",     "title",   "upper",    "zfill",
    "isnumeric",  "isdecimal",    "istitle"};
constexpr std::string_view kDictSafe[] = {"get", "items", "keys", "values", "copy"};
constexpr std::string_view kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kListSafe[] = {"count", "index", "copy"};
constexpr std::string_view kListUnsafe[] = {"append", "clear",  "extend",  "insert",
                                            "pop",    "remove", "reverse", "sort"};

template <size_t N>
bool In(const std::string_view (&set)[N], std::string_view name) {
  return std::find(std::begin(set), std::end(set), name) != std::end(set);
}

StatusOr<std::string> StrArg(const std::optional<Value>& v, const std::string& method) {
  if (!v || !v->is_string()) {
    return InvalidArgumentError(method + "() argument must be str, not " +
                                (v ? v->TypeName() : std::string("nothing")));
  }
  return v->str();
}

StatusOr<int64_t> IntArg(const std::optional<Value>& v, int64_t fallback) {
  if (!v || v->is_none()) return fallback;
  if (!v->is_integral()) {
    return InvalidArgumentError("'" + v->TypeName() +
                                "' object cannot be interpreted as an integer");
  }
  return v->int_value();
}

// The optional `chars`/`sep` argument: unset or None means "whitespace".
StatusOr<std::optional<std::string>> OptionalStr(const std::optional<Value>& v,
                                                 const std::string& method) {
  if (!v || v->is_none()) return std::optional<std::string>();
  ASSIGN_OR_RETURN(std::string s, StrArg(v, method));
  return std::optional<std::string>(std::move(s));
}

Value StringList(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value::String(std::move(p)));
  return Value::List(std::move(out));
}

// startswith/endswith accept a str or a tuple of str.
StatusOr<bool> AffixMatch(const std::string& s, const Value& affix, bool prefix,
                          const std::string& method) {
  auto one = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0
                  : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_tuple()) {
    for (const Value& item : affix.items()) {
      ASSIGN_OR_RETURN(std::string a, StrArg(item, method));
      if (one(a)) return true;
    }
    return false;
  }
  if (!affix.is_string()) {
    return InvalidArgumentError(method + " first arg must be str or a tuple of str, not " +
                                affix.TypeName());
  }
  return one(affix.str());
}

std::string Pad(const std::string& s, int64_t width, const std::string& fill, int align) {
  int64_t len = static_cast<int64_t>(CodepointCount(s));
  if (width <= len) return s;
  int64_t marg = width - len;
  int64_t left = align < 0 ? 0 : align > 0 ? marg : marg / 2 + (marg & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < marg - left; ++i) out += fill;
  return out;
}

void GroupThousands(std::string* digits) {
  std::string out;
  int n = 0;
  for (size_t i = digits->size(); i > 0; --i) {
    if (n && n % 3 == 0) out.push_back(',');
    out.push_back((*digits)[i - 1]);
    ++n;
  }
  *digits = std::string(out.rbegin(), out.rend());
}

// Python's format-spec mini-language: [[fill]align][sign][#][0][width][,][.precision][type].
StatusOr<std::string> ApplyFormatSpec(const Value& v, const std::string& spec) {
  if (spec.empty()) return PyStr(v);
  std::u32string cps = DecodeCodepoints(spec);
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  size_t i = 0;
  std::string fill = " ";
  char32_t align = 0;
  if (cps.size() >= 2 && is_align(cps[1])) {
    fill.clear();
    AppendCodepoint(cps[0], &fill);
    align = cps[1];
    i = 2;
  } else if (!cps.empty() && is_align(cps[0])) {
    align = cps[0];
    i = 1;
  }
  char sign = '-';
  if (i < cps.size() && (cps[i] == '+' || cps[i] == '-' || cps[i] == ' '))
    sign = static_cast<char>(cps[i++]);
  bool alt = false;
  if (i < cps.size() && cps[i] == '#') {
    alt = true;
    ++i;
  }
  if (i < cps.size() && cps[i] == '0') {
    if (!align) {
      fill = "0";
      align = '=';
    }
    ++i;
  }
  int64_t width = 0;
  while (i < cps.size() && cps[i] >= '0' && cps[i] <= '9' && width < 100000)
    width = width * 10 + (cps[i++] - '0');
  bool group = false;
  if (i < cps.size() && cps[i] == ',') {
    group = true;
    ++i;
  }
  int precision = -1;
  if (i < cps.size() && cps[i] == '.') {
    precision = 0;
    ++i;
    while (i < cps.size() && cps[i] >= '0' && cps[i] <= '9' && precision < 1000)
      precision = precision * 10 + static_cast<int>(cps[i++] - '0');
  }
  char type = 0;
  if (i < cps.size()) type = static_cast<char>(cps[i++]);
  if (i != cps.size() || width > 4096) return InvalidArgumentError("Invalid format specifier");

  std::string body, prefix;
  const bool numeric_type =
      type && std::string_view("bcdoxXneEfFgG%").find(type) != std::string_view::npos;
  if (v.is_string() || (v.is_bool() && !numeric_type)) {
    if (type && type != 's')
      return InvalidArgumentError(std::string("Unknown format code '") + type +
                                  "' for object of type 'str'");
    std::u32string text = DecodeCodepoints(PyStr(v));
    if (precision >= 0 && static_cast<size_t>(precision) < text.size()) text.resize(precision);
    body = EncodeCodepoints(text);
    if (!align) align = '<';
  } else if (v.is_number()) {
    if (!align) align = '>';
    const bool as_int =
        v.is_integral() && (!type || type == 'd' || type == 'n' || type == 'b' || type == 'o' ||
                            type == 'x' || type == 'X' || type == 'c');
    char buf[1100];
    if (as_int) {
      int64_t n = v.int_value();
      uint64_t mag = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
      if (n < 0) prefix = "-";
      if (type == 'x' || type == 'X' || type == 'o') {
        std::snprintf(buf, sizeof(buf),
                      type == 'x'   ? "%llx"
                      : type == 'X' ? "%llX"
                                    : "%llo",
                      static_cast<unsigned long long>(mag));
        body = buf;
        if (alt) prefix += type == 'o' ? "0o" : type == 'x' ? "0x" : "0X";
      } else if (type == 'b') {
        do {
          body.insert(body.begin(), static_cast<char>('0' + (mag & 1)));
          mag >>= 1;
        } while (mag);
        if (alt) prefix += "0b";
      } else if (type == 'c') {
        AppendCodepoint(static_cast<char32_t>(mag), &body);
      } else {
        body = std::to_string(mag);
        if (group) GroupThousands(&body);
      }
    } else {
      if (v.is_float() && !type && precision < 0) {
        body = PyFloatRepr(v.float_value());
      } else {
        double x = v.AsDouble();
        char t = type ? type : 'g';
        int p = precision >= 0 ? precision : 6;
        if (t == '%') {
          std::snprintf(buf, sizeof(buf), "%.*f%%", p, x * 100);
        } else {
          const char fmt[] = {'%', '.', '*', t == 'n' ? 'g' : t, 0};
          std::snprintf(buf, sizeof(buf), fmt, p, x);
        }
        body = buf;
      }
      if (!body.empty() && body[0] == '-') {
        prefix = "-";
        body.erase(0, 1);
      }
      if (group) {
        size_t end = body.find_first_not_of("0123456789");
        std::string ip = body.substr(0, end);
        GroupThousands(&ip);
        body = ip + (end == std::string::npos ? "" : body.substr(end));
      }
    }
    if (prefix.empty() || prefix[0] != '-') {
      if (sign == '+') prefix.insert(0, "+");
      if (sign == ' ') prefix.insert(0, " ");
    }
  } else {
    return InvalidArgumentError("unsupported format string passed to " + v.TypeName() +
                                ".__format__");
  }
  const int64_t len = static_cast<int64_t>(CodepointCount(prefix) + CodepointCount(body));
  std::string pad;
  for (int64_t k = len; k < width; ++k) pad += fill;
  if (align == '=') return prefix + pad + body;
  std::string full = prefix + body;
  if (align == '<') return full + pad;
  if (align == '>') return pad + full;
  const int64_t left = (width - len) / 2;
  std::string lpad, rpad;
  for (int64_t k = 0; k < left; ++k) lpad += fill;
  for (int64_t k = left; k < width - len; ++k) rpad += fill;
  return lpad + full + rpad;
}

// str.format with positional ({}, {0}) and keyword ({name}) fields and !r/!s conversions.
StatusOr<std::string> Format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos)
      return InvalidArgumentError("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string spec, conv;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conv = field.substr(bang + 1);
      field.resize(bang);
    }
    const Value* v = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
      size_t idx = field.empty() ? auto_index++ : std::stoul(field.substr(0, 9));
      if (idx >= args.positional.size()) {
        return InvalidArgumentError("Replacement index " + std::to_string(idx) +
                                    " out of range for positional args tuple");
      }
      v = &args.positional[idx];
    } else {
      v = args.Keyword(field);
      if (!v) return InvalidArgumentError("KeyError: '" + field + "'");
    }
    Value shown = conv == "r"   ? Value::String(PyRepr(*v))
                  : conv == "s" ? Value::String(PyStr(*v))
                                : *v;
    ASSIGN_OR_RETURN(std::string text, ApplyFormatSpec(shown, spec));
    out += text;
    if (out.size() > kMaxStringBytes)
      return ResourceExhaustedError("value too large for a template");
  }
  return out;
}

StatusOr<Value> StrMethod(Interpreter& interp, const std::string& s, const std::string& name,
                          const CallArgs& args) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ASSIGN_OR_RETURN(auto b, BindArgs(name, args, {"chars"}));
    ASSIGN_OR_RETURN(auto chars, OptionalStr(b[0], name));
    StripSide side = name == "strip"    ? StripSide::kBoth
                     : name == "lstrip" ? StripSide::kLeft
                                        : StripSide::kRight;
    return Value::String(PyStrip(s, side, chars));
  }
  if (name == "split" || name == "rsplit") {
    ASSIGN_OR_RETURN(auto b, BindArgs(name, args, {"sep", "maxsplit"}));
    ASSIGN_OR_RETURN(auto sep, OptionalStr(b[0], name));
    if (sep && sep->empty()) return InvalidArgumentError("empty separator");
    ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(b[1], -1));
    return StringList(name == "split" ? PySplit(s, sep, maxsplit) : PyRSplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    ASSIGN_OR_RETURN(auto b, BindArgs(name, args, {"keepends"}));
    return StringList(PySplitLines(s, b[0] && b[0]->Truthy()));
  }
  if (name == "startswith" || name == "endswith") {
    ASSIGN_OR_RETURN(auto b, BindArgs(name, args, {"prefix", "start", "end"}));
    if (!b[0]) return InvalidArgumentError(name + "() takes at least 1 argument (0 given)");
    std::string target = s;
    if (b[1] || b[2]) {
      std::u32string cps = DecodeCodepoints(s);
      int64_t n = static_cast<int64_t>(cps.size());
      ASSIGN_OR_RETURN(int64_t start, IntArg(b[1], 0));
      ASSIGN_OR_RETURN(int64_t end, IntArg(b[2], n));
      if (start < 0) start = std::max<int64_t>(0, start + n);
      if (end < 0) end = std::max<int64_t>(0, end + n);
      start = std::min(start, n);
      end = std::min(end, n);
      target =
          start < end ? EncodeCodepoints(std::u32string_view(cps).substr(start, end - start)) : "";
    }
    ASSIGN_OR_RETURN(bool ok, AffixMatch(target, *b[0], name == "startswith", name));
    return Value::Bool(ok);
  }
  if (name == "upper") return Value::String(PyUpper(s));
  if (name == "lower" || name == "casefold") return Value::String(PyLower(s));
  if (name == "title") return Value::String(PyTitle(s));
  if (name == "capitalize") return Value::String(PyCapitalize(s));
  if (name == "swapcase") {
    std::string out;
    for (char32_t cp : DecodeCodepoints(s)) {
      char32_t up = PyToUpper(cp);
      AppendCodepoint(up != cp ? up : PyToLower(cp), &out);
    }
    return Value::String(std::move(out));
  }
  if (name == "replace") {
    ASSIGN_OR_RETURN(auto b, BindArgs(name, args, {"old", "new", "count"}));
    ASSIGN_OR_RETURN(std::string old_text, StrArg(b[0], name));
    ASSIGN_OR_RETURN(std::string new_text, StrArg(b[1], name));
    ASSIGN_OR_RETURN(int64_t count, IntArg(b[2], -1));
    std::string out = PyReplace(s, old_text, new_text, count);
    if (out.size() > kMaxStringBytes)
      return ResourceExhaustedError("value too large for a template");
    return Value::String(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    ASSIGN_OR_RETURN(auto b, BindArgs(name, args, {"sub", "start", "end"}));
    ASSIGN_OR_RETURN(std::string sub, StrArg(b[0], name));
    if (name == "count") return Value::Int(PyCount(s, sub));
    ASSIGN_OR_RETURN(int64_t start, IntArg(b[1], 0));
    ASSIGN_OR_RETURN(int64_t end, IntArg(b[2], INT64_MAX));
    int64_t at = PyFind(s, sub, start, end, name[0] == 'r');
    if (at < 0 && (name == "index" || name == "rindex")) {
      return InvalidArgumentError("substring not found");
    }
    return Value::Int(at);
  }
  if (name == "join") {
    ASSIGN_OR_RETURN(auto b, BindArgs(name, args, {"iterable"}));
    if (!b[0]) return InvalidArgumentError("join() takes exactly one argument (0 given)");
    ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(*b[0]));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return InvalidArgumentError("sequence item " + std::to_string(i) +
                                    ": expected str instance, " + items[i].TypeName() + " found");
      }
      if (i) out += s;
      out += items[i].str();
      if (out.size() > kMaxStringBytes)
        return ResourceExhaustedError("value too large for a template");
    }
    return Value::String(std::move(out));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    ASSIGN_OR_RETURN(auto b, BindArgs(name, args, {"width", "fillchar"}));
    ASSIGN_OR_RETURN(int64_t width, IntArg(b[0], 0));
    if (width > static_cast<int64_t>(kMaxStringBytes))
      return ResourceExhaustedError("value too large for a template");
    std::string fill = " ";
    if (b[1]) {
      ASSIGN_OR_RETURN(fill, StrArg(b[1], name));
      if (CodepointCount(fill) != 1) {
        return InvalidArgumentError("The fill character must be exactly one character long");
      }
    }
    return Value::String(Pad(s, width, fill, name == "center" ? 0 : name == "ljust" ? -1 : 1));
  }
  if (name == "zfill") {
    ASSIGN_OR_RETURN(auto b, BindArgs(name, args, {"width"}));
    ASSIGN_OR_RETURN(int64_t width, IntArg(b[0], 0));
    int64_t len = static_cast<int64_t>(CodepointCount(s));
    if (width <= len) return Value::String(s);
    if (width > static_cast<int64_t>(kMaxStringBytes))
      return ResourceExhaustedError("value too large for a template");
    size_t sign = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
    return Value::String(s.substr(0, sign) + std::string(static_cast<size_t>(width - len), '0') +
                         s.substr(sign));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ASSIGN_OR_RETURN(auto b, BindArgs(name, args, {"affix"}));
    ASSIGN_OR_RETURN(std::string a, StrArg(b[0], name));
    if (name == "removeprefix" && s.compare(0, a.size(), a) == 0)
      return Value::String(s.substr(a.size()));
    if (name == "removesuffix" && a.size() <= s.size() && !a.empty() &&
        s.compare(s.size() - a.size(), a.size(), a) == 0) {
      return Value::String(s.substr(0, s.size() - a.size()));
    }
    return Value::String(s);
  }
  if (name == "partition" || name == "rpartition") {
    ASSIGN_OR_RETURN(auto b, BindArgs(name, args, {"sep"}));
    ASSIGN_OR_RETURN(std::string sep, StrArg(b[0], name));
    if (sep.empty()) return InvalidArgumentError("empty separator");
    size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos) {
      return name == "partition"
                 ? Value::Tuple({Value::String(s), Value::String(""), Value::String("")})
                 : Value::Tuple({Value::String(""), Value::String(""), Value::String(s)});
    }
    return Value::Tuple({Value::String(s.substr(0, at)), Value::String(sep),
                         Value::String(s.substr(at + sep.size()))});
  }
  if (name == "format") {
    ASSIGN_OR_RETURN(std::string out, Format(s, args));
    return Value::String(std::move(out));
  }
  if (name.rfind("is", 0) == 0) {
    std::u32string cps = DecodeCodepoints(s);
    if (cps.empty()) return Value::Bool(false);
    bool ok = true, any_cased = false;
    for (char32_t cp : cps) {
      if (name == "isalnum") ok &= IsPyAlnum(cp);
      if (name == "isalpha") ok &= IsPyAlpha(cp);
      if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") ok &= IsPyDigit(cp);
      if (name == "isspace") ok &= IsPySpace(cp);
      if (name == "islower") {
        ok &= PyToUpper(cp) == cp;
        any_cased |= PyToUpper(cp) != cp;
      }
      if (name == "isupper") {
        ok &= PyToLower(cp) == cp;
        any_cased |= PyToLower(cp) != cp;
      }
    }
    if (name == "istitle") return Value::Bool(PyTitle(s) == s && PyLower(s) != PyUpper(s));
    if (name == "islower" || name == "isupper") ok &= any_cased;
    return Value::Bool(ok);
  }
  return InvalidArgumentError("'str' object has no attribute '" + name + "'");
}

StatusOr<Value> DictMethod(const Value& self, const std::string& name, const CallArgs& args) {
  const ValueDict& dict = self.dict();
  if (name == "get") {
    ASSIGN_OR_RETURN(auto b, BindArgs("get", args, {"key", "default"}));
    if (!b[0]) return InvalidArgumentError("get expected at least 1 argument, got 0");
    ASSIGN_OR_RETURN(const Value* found, dict.Find(*b[0]));
    if (found) return *found;
    return b[1] ? *b[1] : Value::None();
  }
  if (!args.positional.empty() || !args.keyword.empty()) {
    return InvalidArgumentError("dict." + name + "() takes no arguments");
  }
  if (name == "copy") return self;
  std::vector<Value> out;
  out.reserve(dict.size());
  for (const auto& [key, value] : dict.entries()) {
    if (name == "items") out.push_back(Value::Tuple({key, value}));
    if (name == "keys") out.push_back(key);
    if (name == "values") out.push_back(value);
  }
  return Value::List(std::move(out));
}

StatusOr<Value> ListMethod(const Value& self, const std::string& name, const CallArgs& args) {
  const auto& items = self.items();
  if (name == "copy") return Value::List(items);
  ASSIGN_OR_RETURN(auto b, BindArgs(name, args, {"value"}));
  if (!b[0]) return InvalidArgumentError(name + "() takes exactly one argument (0 given)");
  int64_t count = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (PyEquals(items[i], *b[0])) {
      if (name == "index") return Value::Int(static_cast<int64_t>(i));
      ++count;
    }
  }
  if (name == "index") return InvalidArgumentError(PyRepr(*b[0]) + " is not in list");
  return Value::Int(count);
}

}  // namespace

bool HasMethod(const Value& self, std::string_view name, bool* unsafe) {
  *unsafe = false;
  if (self.is_string()) return In(kStrMethods, name);
  if (self.is_dict()) {
    if (In(kDictUnsafe, name)) *unsafe = true;
    return *unsafe || In(kDictSafe, name);
  }
  if (self.is_list()) {
    if (In(kListUnsafe, name)) *unsafe = true;
    return *unsafe || In(kListSafe, name);
  }
  if (self.is_tuple()) return name == "count" || name == "index";
  return false;
}

StatusOr<Value> CallMethod(Interpreter& interp, const Value& self, const std::string& name,
                           const CallArgs& args) {
  RETURN_IF_ERROR(interp.Tick());
  if (self.is_string()) return StrMethod(interp, self.str(), name, args);
  if (self.is_dict()) return DictMethod(self, name, args);
  if (self.is_sequence()) return ListMethod(self, name, args);
  return InvalidArgumentError("'" + self.TypeName() + "' object has no attribute '" + name + "'");
}

}  // namespace pagellm::jinja
