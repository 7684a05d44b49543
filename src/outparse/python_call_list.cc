#include "outparse/python_call_list.h"

#include <cctype>

#include "nlohmann/json.hpp"
#include "outparse/json_prefix.h"

namespace pagellm {
namespace {

using OJson = nlohmann::ordered_json;

enum class Step { kDone, kMore, kError };

class CallListReader {
 public:
  explicit CallListReader(std::string_view t) : t_(t) {}

  PythonCallList Read() {
    PythonCallList out;
    SkipSpace();
    if (pos_ >= t_.size()) return out;
    if (t_[pos_] != '[') {
      out.error = true;
      return out;
    }
    ++pos_;
    while (true) {
      SkipSpace();
      if (pos_ >= t_.size()) return out;
      if (t_[pos_] == ']' && out.calls.empty()) break;
      ParsedToolCall call;
      const Step s = Call(&call);
      if (s != Step::kDone) {
        out.error = s == Step::kError;
        return out;
      }
      out.calls.push_back(std::move(call));
      SkipSpace();
      if (pos_ >= t_.size()) return out;
      if (t_[pos_] == ']') break;
      if (t_[pos_] != ',') {
        out.error = true;
        return out;
      }
      ++pos_;
    }
    out.closed = true;
    out.end = pos_ + 1;
    return out;
  }

 private:
  static constexpr int kMaxDepth = 64;

  void SkipSpace() {
    while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_]))) ++pos_;
  }

  static bool IsIdent(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

  // An identifier (dotted when `dotted`); kMore when the text ends inside it.
  Step Identifier(bool dotted, std::string* out) {
    const size_t start = pos_;
    while (pos_ < t_.size() && (IsIdent(t_[pos_]) || (dotted && t_[pos_] == '.'))) ++pos_;
    if (pos_ >= t_.size()) return Step::kMore;
    if (pos_ == start || std::isdigit(static_cast<unsigned char>(t_[start]))) return Step::kError;
    *out = std::string(t_.substr(start, pos_ - start));
    return Step::kDone;
  }

  Step Expect(char c) {
    SkipSpace();
    if (pos_ >= t_.size()) return Step::kMore;
    if (t_[pos_] != c) return Step::kError;
    ++pos_;
    return Step::kDone;
  }

  Step Call(ParsedToolCall* call) {
    if (Step s = Identifier(true, &call->name); s != Step::kDone) return s;
    if (Step s = Expect('('); s != Step::kDone) return s;
    OJson args = OJson::object();
    while (true) {
      SkipSpace();
      if (pos_ >= t_.size()) return Step::kMore;
      if (t_[pos_] == ')') break;
      std::string key;
      if (Step s = Identifier(false, &key); s != Step::kDone) return s;
      if (Step s = Expect('='); s != Step::kDone) return s;
      OJson value;
      if (Step s = Value(0, &value); s != Step::kDone) return s;
      args[key] = std::move(value);
      SkipSpace();
      if (pos_ >= t_.size()) return Step::kMore;
      if (t_[pos_] == ')') break;
      if (t_[pos_] != ',') return Step::kError;
      ++pos_;
    }
    ++pos_;
    call->arguments = CanonicalJson(args);
    call->complete = true;
    return Step::kDone;
  }

  Step Value(int depth, OJson* out) {
    if (depth > kMaxDepth) return Step::kError;
    SkipSpace();
    if (pos_ >= t_.size()) return Step::kMore;
    const char c = t_[pos_];
    if (c == '"' || c == '\'') return String(out);
    if (c == '[') return Sequence(depth, ']', out);
    if (c == '(') return Sequence(depth, ')', out);
    if (c == '{') return Dict(depth, out);
    if (c == '-' || c == '+' || c == '.' || std::isdigit(static_cast<unsigned char>(c)))
      return Number(out);
    std::string word;
    if (Step s = Identifier(false, &word); s != Step::kDone) return s;
    if (word == "True")
      *out = true;
    else if (word == "False")
      *out = false;
    else if (word == "None")
      *out = nullptr;
    else
      return Step::kError;
    return Step::kDone;
  }

  Step Sequence(int depth, char close, OJson* out) {
    ++pos_;
    *out = OJson::array();
    while (true) {
      SkipSpace();
      if (pos_ >= t_.size()) return Step::kMore;
      if (t_[pos_] == close) break;
      OJson v;
      if (Step s = Value(depth + 1, &v); s != Step::kDone) return s;
      out->push_back(std::move(v));
      SkipSpace();
      if (pos_ >= t_.size()) return Step::kMore;
      if (t_[pos_] == close) break;
      if (t_[pos_] != ',') return Step::kError;
      ++pos_;
    }
    ++pos_;
    return Step::kDone;
  }

  Step Dict(int depth, OJson* out) {
    ++pos_;
    *out = OJson::object();
    while (true) {
      SkipSpace();
      if (pos_ >= t_.size()) return Step::kMore;
      if (t_[pos_] == '}') break;
      OJson key;
      if (Step s = Value(depth + 1, &key); s != Step::kDone) return s;
      if (!key.is_string()) return Step::kError;
      if (Step s = Expect(':'); s != Step::kDone) return s;
      OJson v;
      if (Step s = Value(depth + 1, &v); s != Step::kDone) return s;
      (*out)[key.get<std::string>()] = std::move(v);
      SkipSpace();
      if (pos_ >= t_.size()) return Step::kMore;
      if (t_[pos_] == '}') break;
      if (t_[pos_] != ',') return Step::kError;
      ++pos_;
    }
    ++pos_;
    return Step::kDone;
  }

  Step Number(OJson* out) {
    const size_t start = pos_;
    while (pos_ < t_.size() &&
           (std::isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '.' ||
            t_[pos_] == '-' || t_[pos_] == '+' || t_[pos_] == '_'))
      ++pos_;
    if (pos_ >= t_.size()) return Step::kMore;
    std::string digits;
    for (char c : t_.substr(start, pos_ - start))
      if (c != '_' && c != '+') digits += c;
    // Python allows "1." and ".5"; JSON needs a digit on both sides of the point.
    if (!digits.empty() && digits.back() == '.') digits += '0';
    if (digits.size() >= 2 && digits[0] == '-' && digits[1] == '.') digits.insert(1, "0");
    if (!digits.empty() && digits[0] == '.') digits.insert(0, "0");
    auto v = OJson::parse(digits, nullptr, false);
    if (v.is_discarded() || !v.is_number()) return Step::kError;
    // Python writes 1.0 as a float; keep it one (json.dumps writes "1.0").
    if (v.is_number_integer() && digits.find_first_of(".eE") != std::string::npos)
      v = static_cast<double>(v.get<int64_t>());
    *out = std::move(v);
    return Step::kDone;
  }

  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  static void AppendUtf8(uint32_t cp, std::string* s) {
    if (cp < 0x80) {
      *s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *s += static_cast<char>(0xC0 | (cp >> 6));
      *s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *s += static_cast<char>(0xE0 | (cp >> 12));
      *s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *s += static_cast<char>(0xF0 | (cp >> 18));
      *s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  Step String(OJson* out) {
    const char quote = t_[pos_++];
    std::string s;
    while (pos_ < t_.size()) {
      const char c = t_[pos_];
      if (c == quote) {
        ++pos_;
        *out = std::move(s);
        return Step::kDone;
      }
      if (c == '\n') return Step::kError;
      if (c != '\\') {
        s += c;
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= t_.size()) return Step::kMore;
      const char e = t_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case 'n':
          s += '\n';
          break;
        case 't':
          s += '\t';
          break;
        case 'r':
          s += '\r';
          break;
        case '0':
          s += '\0';
          break;
        case '\\':
          s += '\\';
          break;
        case '\'':
          s += '\'';
          break;
        case '"':
          s += '"';
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > t_.size()) return Step::kMore;
          uint32_t cp = 0;
          for (size_t i = 0; i < n; ++i) {
            const int h = Hex(t_[pos_ + i]);
            if (h < 0) return Step::kError;
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return Step::kError;
          AppendUtf8(cp, &s);
          pos_ += n;
          break;
        }
        default:
          // Python keeps an unknown escape as written.
          s += '\\';
          s += e;
      }
    }
    return Step::kMore;
  }

  std::string_view t_;
  size_t pos_ = 0;
};

}  // namespace

PythonCallList ReadPythonCallList(std::string_view text) {
  return CallListReader(text).Read();
}

}  // namespace pagellm
