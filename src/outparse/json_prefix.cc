#include "outparse/json_prefix.h"

#include "chat/python_json.h"
#include "fmt/format.h"

namespace pagellm {
namespace {

enum class Step { kDone, kMore, kError };

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Appends code point `cp` as json.dumps(ensure_ascii=False) writes it inside a string.
void AppendEscaped(uint32_t cp, std::string* out) {
  switch (cp) {
    case '"':
      *out += "\\\"";
      return;
    case '\\':
      *out += "\\\\";
      return;
    case '\b':
      *out += "\\b";
      return;
    case '\f':
      *out += "\\f";
      return;
    case '\n':
      *out += "\\n";
      return;
    case '\r':
      *out += "\\r";
      return;
    case '\t':
      *out += "\\t";
      return;
    default:
      break;
  }
  if (cp < 0x20) {
    *out += fmt::format("\\u{:04x}", cp);
  } else if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Recursive descent that stops cleanly (kMore) where the text runs out. Nesting is bounded so
// that hostile model output cannot exhaust the stack.
class PrefixWriter {
 public:
  PrefixWriter(std::string_view raw, std::string* out) : raw_(raw), out_(out) {}

  Step Value(int depth) {
    if (depth > kMaxDepth) return Step::kError;
    SkipSpace();
    if (pos_ >= raw_.size()) return Step::kMore;
    const char c = raw_[pos_];
    if (c == '{') return Container(depth, '}', true);
    if (c == '[') return Container(depth, ']', false);
    if (c == '"') return String();
    if (c == 't') return Literal("true");
    if (c == 'f') return Literal("false");
    if (c == 'n') return Literal("null");
    if (c == '-' || (c >= '0' && c <= '9')) return Number();
    return Step::kError;
  }

  size_t pos() const { return pos_; }

 private:
  static constexpr int kMaxDepth = 128;

  void SkipSpace() {
    while (pos_ < raw_.size() && IsSpace(raw_[pos_])) ++pos_;
  }

  Step Container(int depth, char close, bool object) {
    *out_ += raw_[pos_++];
    SkipSpace();
    if (pos_ >= raw_.size()) return Step::kMore;
    if (raw_[pos_] == close) {
      *out_ += raw_[pos_++];
      return Step::kDone;
    }
    while (true) {
      if (object) {
        SkipSpace();
        if (pos_ >= raw_.size()) return Step::kMore;
        if (raw_[pos_] != '"') return Step::kError;
        if (Step s = String(); s != Step::kDone) return s;
        SkipSpace();
        if (pos_ >= raw_.size()) return Step::kMore;
        if (raw_[pos_] != ':') return Step::kError;
        ++pos_;
        *out_ += ": ";
      }
      if (Step s = Value(depth + 1); s != Step::kDone) return s;
      SkipSpace();
      if (pos_ >= raw_.size()) return Step::kMore;
      if (raw_[pos_] == close) {
        *out_ += raw_[pos_++];
        return Step::kDone;
      }
      if (raw_[pos_] != ',') return Step::kError;
      ++pos_;
      *out_ += ", ";
    }
  }

  Step Literal(std::string_view word) {
    const std::string_view have = raw_.substr(pos_, word.size());
    if (word.substr(0, have.size()) != have) return Step::kError;
    if (have.size() < word.size()) return Step::kMore;
    pos_ += word.size();
    *out_ += word;
    return Step::kDone;
  }

  // A number is written once a delimiter follows it (more digits could still come).
  Step Number() {
    size_t e = pos_;
    while (e < raw_.size() &&
           std::string_view("0123456789+-.eE").find(raw_[e]) != std::string_view::npos)
      ++e;
    if (e >= raw_.size()) return Step::kMore;
    auto parsed = nlohmann::ordered_json::parse(raw_.substr(pos_, e - pos_), nullptr, false);
    if (parsed.is_discarded() || !parsed.is_number()) return Step::kError;
    *out_ += CanonicalJson(parsed);
    pos_ = e;
    return Step::kDone;
  }

  // Reads 4 hex digits at `at`; -2 when the text ends first, -1 when they are not hex.
  int32_t Hex4(size_t at) const {
    if (at + 4 > raw_.size()) {
      for (size_t i = at; i < raw_.size(); ++i)
        if (HexValue(raw_[i]) < 0) return -1;
      return -2;
    }
    int32_t v = 0;
    for (size_t i = at; i < at + 4; ++i) {
      const int h = HexValue(raw_[i]);
      if (h < 0) return -1;
      v = v * 16 + h;
    }
    return v;
  }

  // Characters are written as they arrive; an escape only once whole.
  Step String() {
    *out_ += '"';
    ++pos_;
    while (pos_ < raw_.size()) {
      const unsigned char c = static_cast<unsigned char>(raw_[pos_]);
      if (c == '"') {
        *out_ += '"';
        ++pos_;
        return Step::kDone;
      }
      if (c < 0x20) return Step::kError;
      if (c != '\\') {
        // UTF-8 bytes other than the two that need escaping pass through.
        *out_ += static_cast<char>(c);
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= raw_.size()) return Step::kMore;
      const char e = raw_[pos_ + 1];
      uint32_t cp = 0;
      size_t len = 2;
      switch (e) {
        case '"':
          cp = '"';
          break;
        case '\\':
          cp = '\\';
          break;
        case '/':
          cp = '/';
          break;
        case 'b':
          cp = '\b';
          break;
        case 'f':
          cp = '\f';
          break;
        case 'n':
          cp = '\n';
          break;
        case 'r':
          cp = '\r';
          break;
        case 't':
          cp = '\t';
          break;
        case 'u': {
          const int32_t hi = Hex4(pos_ + 2);
          if (hi == -2) return Step::kMore;
          if (hi < 0) return Step::kError;
          len = 6;
          cp = static_cast<uint32_t>(hi);
          if (cp >= 0xD800 && cp < 0xDC00) {
            // A high surrogate must be followed by \u and a low one.
            const size_t at = pos_ + 6;
            const std::string_view next = raw_.substr(at, 2);
            if (std::string_view("\\u").substr(0, next.size()) != next) return Step::kError;
            if (next.size() < 2) return Step::kMore;
            const int32_t lo = Hex4(at + 2);
            if (lo == -2) return Step::kMore;
            if (lo < 0xDC00 || lo >= 0xE000) return Step::kError;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<uint32_t>(lo) - 0xDC00);
            len = 12;
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            return Step::kError;
          }
          break;
        }
        default:
          return Step::kError;
      }
      AppendEscaped(cp, out_);
      pos_ += len;
    }
    return Step::kMore;
  }

  std::string_view raw_;
  std::string* out_;
  size_t pos_ = 0;
};

}  // namespace

JsonPrefix CanonicalJsonPrefix(std::string_view raw) {
  JsonPrefix p;
  PrefixWriter w(raw, &p.text);
  const Step s = w.Value(0);
  p.complete = s == Step::kDone;
  p.error = s == Step::kError;
  if (p.complete) p.end = w.pos();
  return p;
}

std::string CanonicalJson(const nlohmann::ordered_json& value) {
  auto v = jinja::ValueFromJson(value);
  if (!v.ok()) return value.dump();
  auto s = jinja::PyJsonDumps(*v, {});
  return s.ok() ? *s : value.dump();
}

}  // namespace pagellm
