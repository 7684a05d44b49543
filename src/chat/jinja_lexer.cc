#include "chat/jinja_lexer.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "base/utf8.h"
#include "chat/python_text.h"

namespace pagellm::jinja {
namespace {

Status SyntaxError(const std::string& message, int line) {
  return InvalidArgumentError(message + " (line " + std::to_string(line) + ")");
}

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

// Byte length of the Python-whitespace code point at src[pos], or 0.
size_t SpaceLen(std::string_view src, size_t pos) {
  unsigned char c = static_cast<unsigned char>(src[pos]);
  if (c < 0x80) return IsPySpace(c) ? 1 : 0;
  uint32_t cp = 0;
  size_t len = DecodeUtf8(src, pos, &cp);
  return (len > 0 && IsPySpace(cp)) ? len : 0;
}

size_t SkipSpace(std::string_view src, size_t pos) {
  while (pos < src.size()) {
    size_t len = SpaceLen(src, pos);
    if (len == 0) break;
    pos += len;
  }
  return pos;
}

// True when text is non-empty and all Python whitespace (`\s+` full match).
bool AllSpace(std::string_view text) {
  return !text.empty() && SkipSpace(text, 0) == text.size();
}

// Python's str.rstrip() on raw bytes.
std::string_view RStripSpace(std::string_view text) {
  std::u32string cps = DecodeCodepoints(text);
  size_t keep = cps.size();
  while (keep > 0 && IsPySpace(cps[keep - 1])) --keep;
  size_t bytes = 0;
  for (size_t i = 0; i < keep; ++i) {
    std::string tmp;
    AppendCodepoint(cps[i], &tmp);
    bytes += tmp.size();
  }
  return text.substr(0, bytes);
}

int CountNewlines(std::string_view text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// Matches `(\d+_)*\d+` at pos; returns the end or npos.
size_t MatchDigits(std::string_view s, size_t pos) {
  if (pos >= s.size() || !IsDigit(s[pos])) return std::string_view::npos;
  while (true) {
    while (pos < s.size() && IsDigit(s[pos])) ++pos;
    if (pos + 1 < s.size() && s[pos] == '_' && IsDigit(s[pos + 1])) {
      ++pos;
      continue;
    }
    return pos;
  }
}

size_t MatchFloat(std::string_view s, size_t pos) {
  if (pos > 0 && s[pos - 1] == '.') return std::string_view::npos;
  size_t p = MatchDigits(s, pos);
  if (p == std::string_view::npos) return p;
  // Alternative 1: optional fraction, then a mandatory exponent.
  size_t q = p;
  if (q < s.size() && s[q] == '.') {
    size_t f = MatchDigits(s, q + 1);
    if (f != std::string_view::npos) q = f;
  }
  if (q < s.size() && (s[q] | 0x20) == 'e') {
    size_t e = q + 1;
    if (e < s.size() && (s[e] == '+' || s[e] == '-')) ++e;
    size_t end = MatchDigits(s, e);
    if (end != std::string_view::npos) return end;
  }
  // Alternative 2: a mandatory fraction.
  if (p < s.size() && s[p] == '.') return MatchDigits(s, p + 1);
  return std::string_view::npos;
}

size_t MatchInteger(std::string_view s, size_t pos) {
  auto radix = [&](char prefix, auto is_digit) -> size_t {
    if (pos + 1 >= s.size() || s[pos] != '0' || (s[pos + 1] | 0x20) != prefix) {
      return std::string_view::npos;
    }
    size_t p = pos + 2, end = std::string_view::npos;
    while (true) {
      size_t q = p;
      if (q < s.size() && s[q] == '_') ++q;
      if (q < s.size() && is_digit(s[q])) {
        p = q + 1;
        end = p;
      } else {
        return end;
      }
    }
  };
  size_t r = radix('b', [](char c) { return c == '0' || c == '1'; });
  if (r == std::string_view::npos) r = radix('o', [](char c) { return c >= '0' && c <= '7'; });
  if (r == std::string_view::npos) {
    r = radix('x', [](char c) { return IsDigit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); });
  }
  if (r != std::string_view::npos) return r;
  if (pos >= s.size() || !IsDigit(s[pos])) return std::string_view::npos;
  const char want_zero = s[pos] == '0';
  size_t p = pos + 1;
  while (true) {
    size_t q = p;
    if (q < s.size() && s[q] == '_') ++q;
    if (q < s.size() && IsDigit(s[q]) && (!want_zero || s[q] == '0')) {
      p = q + 1;
    } else {
      return p;
    }
  }
}

bool IsNameStart(std::string_view s, size_t pos) {
  unsigned char c = static_cast<unsigned char>(s[pos]);
  if (c >= 0x80) return SpaceLen(s, pos) == 0;
  return c == '_' || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

bool IsNameChar(std::string_view s, size_t pos) {
  return IsNameStart(s, pos) || IsDigit(s[pos]);
}

// Python's unicode-escape decoding of a string literal body.
Status Unescape(std::string_view body, int line, std::string* out) {
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out->push_back(c);
      continue;
    }
    char e = body[++i];
    auto hex = [&](size_t digits, const char* what) -> Status {
      uint32_t cp = 0;
      for (size_t k = 1; k <= digits; ++k) {
        if (i + k >= body.size())
          return SyntaxError(std::string("truncated ") + what + " escape", line);
        char h = body[i + k];
        int d = IsDigit(h)                                 ? h - '0'
                : ((h | 0x20) >= 'a' && (h | 0x20) <= 'f') ? (h | 0x20) - 'a' + 10
                                                           : -1;
        if (d < 0) return SyntaxError(std::string("truncated ") + what + " escape", line);
        cp = cp * 16 + static_cast<uint32_t>(d);
      }
      if (cp > 0x10FFFF) return SyntaxError("illegal Unicode character", line);
      i += digits;
      AppendCodepoint(cp, out);
      return Status::Ok();
    };
    switch (e) {
      case '\n':
        break;  // line continuation
      case '\\':
      case '\'':
      case '"':
        out->push_back(e);
        break;
      case 'a':
        out->push_back('\a');
        break;
      case 'b':
        out->push_back('\b');
        break;
      case 'f':
        out->push_back('\f');
        break;
      case 'n':
        out->push_back('\n');
        break;
      case 'r':
        out->push_back('\r');
        break;
      case 't':
        out->push_back('\t');
        break;
      case 'v':
        out->push_back('\v');
        break;
      case 'x':
        RETURN_IF_ERROR(hex(2, "\\xXX"));
        break;
      case 'u':
        RETURN_IF_ERROR(hex(4, "\\uXXXX"));
        break;
      case 'U':
        RETURN_IF_ERROR(hex(8, "\\UXXXXXXXX"));
        break;
      case 'N':
        return SyntaxError("named Unicode escapes (\\N{...}) are not supported", line);
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k) {
            cp = cp * 8 + static_cast<uint32_t>(body[++i] - '0');
          }
          AppendCodepoint(cp, out);
        } else {
          // Unknown escapes keep their backslash, as Python does.
          out->push_back('\\');
          out->push_back(e);
        }
    }
  }
  return Status::Ok();
}

class LexerImpl {
 public:
  LexerImpl(std::string source, const LexerOptions& options)
      : src_(std::move(source)), opts_(options) {}

  StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) RETURN_IF_ERROR(LexRoot());
    Token eof;
    eof.type = TokenType::kEof;
    eof.line = line_;
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  void Emit(TokenType type, std::string text, int line) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.line = line;
    tokens_.push_back(std::move(t));
  }

  // Applies the `-` marker or lstrip_blocks to the text before a tag and emits it.
  void EmitLeadingText(std::string_view text, char sign, bool is_variable) {
    std::string_view kept = text;
    if (sign == '-') {
      kept = RStripSpace(text);
    } else if (sign != '+' && opts_.lstrip_blocks && !is_variable) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && AllSpace(text.substr(l_pos)))
        kept = text.substr(0, l_pos);
    }
    if (!kept.empty()) Emit(TokenType::kData, std::string(kept), line_);
    line_ += CountNewlines(text);
  }

  std::string_view View() const { return src_; }

  Status LexRoot() {
    std::string_view s = View();
    size_t k = pos_;
    while (true) {
      k = s.find('{', k);
      if (k == std::string_view::npos || k + 1 >= s.size()) {
        k = std::string_view::npos;
        break;
      }
      char c = s[k + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++k;
    }
    if (k == std::string_view::npos) {
      Emit(TokenType::kData, std::string(s.substr(pos_)), line_);
      line_ += CountNewlines(s.substr(pos_));
      pos_ = s.size();
      return Status::Ok();
    }
    const char kind = s[k + 1];
    const char sign = (k + 2 < s.size() && (s[k + 2] == '-' || s[k + 2] == '+')) ? s[k + 2] : 0;
    std::string_view text = s.substr(pos_, k - pos_);
    if (kind == '%') {
      size_t raw_end = MatchRawBegin(k + 2 + (sign ? 1 : 0));
      if (raw_end != std::string_view::npos) {
        EmitLeadingText(text, sign, false);
        line_starting_ = s[raw_end - 1] == '\n';
        line_ += CountNewlines(s.substr(k, raw_end - k));
        pos_ = raw_end;
        return LexRawBody();
      }
    }
    EmitLeadingText(text, sign, kind == '{');
    line_starting_ = false;
    pos_ = k + 2 + (sign ? 1 : 0);
    if (kind == '#') return LexComment();
    Emit(kind == '%' ? TokenType::kBlockBegin : TokenType::kVariableBegin, "", line_);
    return LexTag(kind == '%');
  }

  // `\s*raw\s*(?:-%}\s*|%})` after the block start; returns the end or npos.
  size_t MatchRawBegin(size_t p) const {
    std::string_view s = View();
    p = SkipSpace(s, p);
    if (s.substr(p, 3) != "raw") return std::string_view::npos;
    p = SkipSpace(s, p + 3);
    if (s.substr(p, 3) == "-%}") return SkipSpace(s, p + 3);
    if (s.substr(p, 2) == "%}") return p + 2;
    return std::string_view::npos;
  }

  Status LexRawBody() {
    std::string_view s = View();
    size_t k = pos_;
    while ((k = s.find("{%", k)) != std::string_view::npos) {
      size_t p = k + 2;
      char sign = 0;
      if (p < s.size() && (s[p] == '-' || s[p] == '+')) sign = s[p++];
      p = SkipSpace(s, p);
      if (s.substr(p, 6) == "endraw") {
        p = SkipSpace(s, p + 6);
        size_t end = std::string_view::npos;
        if (s.substr(p, 3) == "+%}") {
          end = p + 3;
        } else if (s.substr(p, 3) == "-%}") {
          end = SkipSpace(s, p + 3);
        } else if (s.substr(p, 2) == "%}") {
          end = p + 2;
          if (opts_.trim_blocks && end < s.size() && s[end] == '\n') ++end;
        }
        if (end != std::string_view::npos) {
          EmitLeadingText(s.substr(pos_, k - pos_), sign, false);
          line_ += CountNewlines(s.substr(k, end - k));
          line_starting_ = s[end - 1] == '\n';
          pos_ = end;
          return Status::Ok();
        }
      }
      ++k;
    }
    return SyntaxError("Missing end of raw directive", line_);
  }

  Status LexComment() {
    std::string_view s = View();
    size_t j = s.find("#}", pos_);
    if (j == std::string_view::npos) return SyntaxError("Missing end of comment tag", line_);
    size_t end = j + 2;
    if (j > pos_ && s[j - 1] == '-') {
      end = SkipSpace(s, end);
    } else if (!(j > pos_ && s[j - 1] == '+')) {
      if (opts_.trim_blocks && end < s.size() && s[end] == '\n') ++end;
    }
    line_ += CountNewlines(s.substr(pos_, end - pos_));
    line_starting_ = s[end - 1] == '\n';
    pos_ = end;
    return Status::Ok();
  }

  // Tries the end-of-tag rule at pos_; returns true (and consumes it) on a match.
  bool MatchTagEnd(bool block) {
    std::string_view s = View();
    size_t start = pos_, end = std::string_view::npos;
    if (block) {
      if (s.substr(pos_, 3) == "+%}") {
        end = pos_ + 3;
      } else if (s.substr(pos_, 3) == "-%}") {
        end = SkipSpace(s, pos_ + 3);
      } else if (s.substr(pos_, 2) == "%}") {
        end = pos_ + 2;
        if (opts_.trim_blocks && end < s.size() && s[end] == '\n') ++end;
      }
    } else {
      if (s.substr(pos_, 3) == "-}}") {
        end = SkipSpace(s, pos_ + 3);
      } else if (s.substr(pos_, 2) == "}}") {
        end = pos_ + 2;
      }
    }
    if (end == std::string_view::npos) return false;
    Emit(block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "", line_);
    line_ += CountNewlines(s.substr(start, end - start));
    line_starting_ = s[end - 1] == '\n';
    pos_ = end;
    return true;
  }

  Status LexTag(bool block) {
    std::string_view s = View();
    std::vector<char> balance;
    while (pos_ < s.size()) {
      if (balance.empty() && MatchTagEnd(block)) return Status::Ok();
      size_t space = SkipSpace(s, pos_);
      if (space > pos_) {
        line_ += CountNewlines(s.substr(pos_, space - pos_));
        line_starting_ = s[space - 1] == '\n';
        pos_ = space;
        continue;
      }
      line_starting_ = false;
      size_t end = MatchFloat(s, pos_);
      if (end != std::string_view::npos) {
        std::string digits;
        for (char c : s.substr(pos_, end - pos_)) {
          if (c != '_') digits.push_back(c);
        }
        Emit(TokenType::kFloat, digits, line_);
        tokens_.back().float_value = std::strtod(digits.c_str(), nullptr);
        pos_ = end;
        continue;
      }
      end = MatchInteger(s, pos_);
      if (end != std::string_view::npos) {
        std::string digits;
        for (char c : s.substr(pos_, end - pos_)) {
          if (c != '_') digits.push_back(c);
        }
        int base = 10;
        size_t skip = 0;
        if (digits.size() > 1 && digits[0] == '0') {
          char p = static_cast<char>(digits[1] | 0x20);
          base = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 10;
          skip = base == 10 ? 0 : 2;
        }
        errno = 0;
        char* stop = nullptr;
        unsigned long long v = std::strtoull(digits.c_str() + skip, &stop, base);
        if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) {
          return SyntaxError("integer literal too large", line_);
        }
        Emit(TokenType::kInteger, digits, line_);
        tokens_.back().int_value = static_cast<int64_t>(v);
        pos_ = end;
        continue;
      }
      if (IsNameStart(s, pos_)) {
        size_t p = pos_;
        while (p < s.size() && IsNameChar(s, p)) ++p;
        Emit(TokenType::kName, std::string(s.substr(pos_, p - pos_)), line_);
        pos_ = p;
        continue;
      }
      if (s[pos_] == '\'' || s[pos_] == '"') {
        const char quote = s[pos_];
        size_t p = pos_ + 1;
        while (p < s.size() && s[p] != quote) p += s[p] == '\\' ? 2 : 1;
        if (p < s.size()) {
          std::string body(s.substr(pos_ + 1, p - pos_ - 1));
          std::string value;
          RETURN_IF_ERROR(Unescape(body, line_, &value));
          Emit(TokenType::kString, std::move(value), line_);
          line_ += CountNewlines(body);
          pos_ = p + 1;
          continue;
        }
      }
      RETURN_IF_ERROR(LexOperator(&balance));
    }
    return Status::Ok();  // The parser reports the unexpected end of the template.
  }

  Status LexOperator(std::vector<char>* balance) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    std::string_view s = View();
    std::string op;
    for (std::string_view two : kTwo) {
      if (s.substr(pos_, 2) == two) op = std::string(two);
    }
    if (op.empty()) {
      constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
      if (kOne.find(s[pos_]) == std::string_view::npos) {
        std::string shown;
        size_t len = Utf8SequenceLength(s, pos_);
        shown = std::string(s.substr(pos_, len == 0 ? 1 : len));
        return SyntaxError("unexpected char " + PyStringRepr(shown) + " at " +
                               std::to_string(CodepointCount(s.substr(0, pos_))),
                           line_);
      }
      op = std::string(1, s[pos_]);
    }
    if (op == "{" || op == "(" || op == "[") {
      balance->push_back(op == "{" ? '}' : op == "(" ? ')' : ']');
    } else if (op == "}" || op == ")" || op == "]") {
      if (balance->empty()) return SyntaxError("unexpected '" + op + "'", line_);
      char expected = balance->back();
      balance->pop_back();
      if (expected != op[0]) {
        return SyntaxError("unexpected '" + op + "', expected '" + std::string(1, expected) + "'",
                           line_);
      }
    }
    Emit(TokenType::kOperator, op, line_);
    pos_ += op.size();
    return Status::Ok();
  }

  std::string src_;
  LexerOptions opts_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

// jinja2 splits the source on \r\n, \r and \n, drops one final empty line unless
// keep_trailing_newline, and joins with \n.
std::string NormalizeSource(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

StatusOr<std::vector<Token>> Lexer::Tokenize(std::string_view source, const LexerOptions& options) {
  LexerImpl impl(NormalizeSource(source, options.keep_trailing_newline), options);
  return impl.Run();
}

}  // namespace pagellm::jinja
