#include "grammar/gbnf_parser.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>
#include <unordered_set>

#include "base/utf8.h"
#include "fmt/format.h"
#include "grammar/code_point_set.h"

namespace pagellm {
namespace {

constexpr int kMaxNesting = 100;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  StatusOr<Grammar> Parse() {
    SkipSpace();
    if (AtEnd()) return Error("grammar is empty");
    while (!AtEnd()) {
      RETURN_IF_ERROR(ParseRule());
      SkipSpace();
    }
    for (const auto& [name, id] : user_rules_) {
      if (g_.alternatives(id).empty())
        return InvalidArgumentError(
            fmt::format("grammar: rule '{}' is used but never defined", name));
    }
    auto root = user_rules_.find("root");
    if (root == user_rules_.end()) return InvalidArgumentError("grammar: no 'root' rule");
    g_.set_root(root->second);
    RETURN_IF_ERROR(g_.Validate().WithContext("grammar"));
    return std::move(g_);
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  Status Error(std::string_view what) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return InvalidArgumentError(fmt::format("grammar: line {} column {}: {}", line, col, what));
  }

  void SkipSpace() {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view ParseName() {
    const size_t begin = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return text_.substr(begin, pos_ - begin);
  }

  // Whether `name ::=` starts at the current position (the end of the previous rule).
  bool AtRuleStart() const {
    size_t p = pos_;
    while (p < text_.size() && IsNameChar(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return text_.substr(p).starts_with("::=");
  }

  int32_t RuleId(std::string_view name) {
    auto it = user_rules_.find(std::string(name));
    if (it != user_rules_.end()) return it->second;
    const int32_t id = g_.AddRule(name);
    user_rules_.emplace(std::string(name), id);
    return id;
  }

  Status ParseRule() {
    const std::string_view name = ParseName();
    if (name.empty()) return Error("expected a rule name");
    SkipSpace();
    if (!text_.substr(pos_).starts_with("::=")) return Error("expected '::='");
    pos_ += 3;
    const int32_t id = RuleId(name);
    if (!defined_.emplace(std::string(name)).second)
      return Error(fmt::format("rule '{}' is defined twice", name));
    std::vector<GrammarSequence> alts;
    RETURN_IF_ERROR(ParseAlternatives(alts, 0, std::string(name)));
    for (GrammarSequence& a : alts) g_.AddAlternative(id, std::move(a));
    return Status::Ok();
  }

  // alternatives := sequence ('|' sequence)*; stops before ')' or the next rule.
  Status ParseAlternatives(std::vector<GrammarSequence>& alts, int depth, const std::string& name) {
    if (depth > kMaxNesting) return Error("groups nested too deeply");
    alts.emplace_back();
    for (;;) {
      SkipSpace();
      if (AtEnd() || Peek() == ')' || AtRuleStart()) return Status::Ok();
      if (Peek() == '|') {
        ++pos_;
        alts.emplace_back();
        continue;
      }
      RETURN_IF_ERROR(ParseItem(alts.back(), depth, name));
    }
  }

  Status ParseItem(GrammarSequence& seq, int depth, const std::string& name) {
    GrammarSequence item;
    const char c = Peek();
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (!AtEnd() && Peek() != '"') {
        ASSIGN_OR_RETURN(uint32_t cp, ParseChar());
        AppendUtf8(cp, &bytes);
      }
      if (AtEnd()) return Error("unterminated string literal");
      ++pos_;
      item = g_.Literal(bytes);
    } else if (c == '[') {
      ++pos_;
      ASSIGN_OR_RETURN(GrammarSymbol s, ParseClass(name));
      item.push_back(s);
    } else if (c == '.') {
      ++pos_;
      if (any_char_.id < 0) {
        CodePointSet all;
        all.Add(0, CodePointSet::kMaxCodePoint);
        any_char_ = all.ToSymbol(g_, "any-char");
      }
      item.push_back(any_char_);
    } else if (c == '(') {
      ++pos_;
      std::vector<GrammarSequence> alts;
      RETURN_IF_ERROR(ParseAlternatives(alts, depth + 1, name));
      if (Peek() != ')') return Error("expected ')'");
      ++pos_;
      if (alts.size() == 1) {
        item = std::move(alts[0]);
      } else {
        item.push_back(g_.Choice(std::move(alts), name + "-group"));
      }
    } else if (IsNameChar(c)) {
      item.push_back(Grammar::Ref(RuleId(ParseName())));
    } else {
      return Error(fmt::format("unexpected character '{}'", c));
    }
    // Postfix operators (several may follow, e.g. x?*).
    for (;;) {
      const char op = Peek();
      int64_t min = 0, max = -1;
      if (op == '*') {
        ++pos_;
      } else if (op == '+') {
        ++pos_;
        min = 1;
      } else if (op == '?') {
        ++pos_;
        max = 1;
      } else if (op == '{') {
        ++pos_;
        RETURN_IF_ERROR(ParseBraces(min, max));
      } else {
        break;
      }
      auto rep = g_.Repeat(item, min, max, name + "-rep");
      if (!rep.ok()) return Error(rep.status().message());
      item = {*rep};
    }
    seq.insert(seq.end(), item.begin(), item.end());
    return Status::Ok();
  }

  Status ParseBraces(int64_t& min, int64_t& max) {
    auto number = [&](int64_t& out) -> bool {
      SkipSpace();
      if (!(Peek() >= '0' && Peek() <= '9')) return false;
      out = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        out = out * 10 + (Peek() - '0');
        if (out > 1000000) out = 1000000;  // Repeat() rejects it with the limit
        ++pos_;
      }
      SkipSpace();
      return true;
    };
    const bool has_min = number(min);
    if (Peek() == '}') {
      if (!has_min) return Error("expected a number in '{}'");
      ++pos_;
      max = min;
      return Status::Ok();
    }
    if (Peek() != ',') return Error("expected ',' or '}' in repetition");
    ++pos_;
    if (!has_min) min = 0;
    if (!number(max)) max = -1;
    if (Peek() != '}') return Error("expected '}'");
    ++pos_;
    return Status::Ok();
  }

  // One character of a literal or class, escapes decoded.
  StatusOr<uint32_t> ParseChar() {
    if (AtEnd()) return Error("unexpected end of grammar");
    const char c = Peek();
    if (c != '\\') {
      uint32_t cp = 0;
      const size_t n = DecodeUtf8(text_, pos_, &cp);
      if (n == 0) return Error("invalid UTF-8");
      pos_ += n;
      return cp;
    }
    ++pos_;
    const char e = Peek();
    ++pos_;
    switch (e) {
      case 'n':
        return uint32_t{'\n'};
      case 'r':
        return uint32_t{'\r'};
      case 't':
        return uint32_t{'\t'};
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
      case '\'':
        return static_cast<uint32_t>(static_cast<uint8_t>(e));
      case 'x':
        return ParseHex(2);
      case 'u':
        return ParseHex(4);
      case 'U':
        return ParseHex(8);
      default:
        --pos_;
        return Error(fmt::format("unknown escape '\\{}'", e));
    }
  }

  StatusOr<uint32_t> ParseHex(int digits) {
    const std::optional<uint32_t> parsed =
        ParseHexDigits(text_.substr(std::min(pos_, text_.size())), digits);
    if (!parsed) {
      // The error points at the first character that is not a hex digit.
      for (int i = 0; i < digits && std::isxdigit(static_cast<unsigned char>(Peek())); ++i) ++pos_;
      return Error("expected a hex digit");
    }
    pos_ += static_cast<size_t>(digits);
    const uint32_t v = *parsed;
    if (v > CodePointSet::kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF))
      return Error("escape is not a Unicode scalar value");
    return v;
  }

  StatusOr<GrammarSymbol> ParseClass(const std::string& name) {
    CodePointSet set;
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    while (!AtEnd() && Peek() != ']') {
      ASSIGN_OR_RETURN(uint32_t lo, ParseChar());
      uint32_t hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        ASSIGN_OR_RETURN(hi, ParseChar());
        if (hi < lo) return Error("character range is out of order");
      }
      set.Add(lo, hi);
    }
    if (AtEnd()) return Error("unterminated character class");
    ++pos_;
    if (negated) set = set.Complement();
    return set.ToSymbol(g_, name + "-char");
  }

  std::string_view text_;
  size_t pos_ = 0;
  Grammar g_;
  std::unordered_map<std::string, int32_t> user_rules_;
  std::unordered_set<std::string> defined_;
  GrammarSymbol any_char_{GrammarSymbol::Kind::kRule, -1};
};

}  // namespace

StatusOr<Grammar> ParseGbnf(std::string_view text) {
  return GbnfParser(text).Parse();
}

}  // namespace pagellm
