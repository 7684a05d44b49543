#include "grammar/regex_converter.h"

#include <algorithm>
#include <cctype>

#include "base/utf8.h"
#include "fmt/format.h"
#include "grammar/code_point_set.h"

namespace pagellm {
namespace {

constexpr int kMaxNesting = 100;

CodePointSet Digits() {
  CodePointSet s;
  s.Add('0', '9');
  return s;
}
CodePointSet WordChars() {
  CodePointSet s;
  s.Add('a', 'z');
  s.Add('A', 'Z');
  s.Add('0', '9');
  s.Add('_');
  return s;
}
CodePointSet Spaces() {
  CodePointSet s;
  for (uint32_t c : {' ', '\t', '\n', '\r', '\f', '\v'}) s.Add(c);
  return s;
}

class RegexParser {
 public:
  RegexParser(Grammar& g, std::string_view re, RegexContext ctx, std::string_view name)
      : g_(g), re_(re), ctx_(ctx), name_(name) {}

  StatusOr<GrammarSymbol> Parse() {
    if (re_.size() > 100000) return InvalidArgumentError("regex: longer than 100000 bytes");
    if (Peek() == '^') ++pos_;
    std::vector<GrammarSequence> alts;
    RETURN_IF_ERROR(ParseAlternation(alts, 0));
    if (!AtEnd()) return Error(Peek() == ')' ? "unbalanced ')'" : "unexpected character");
    if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
    return g_.Choice(std::move(alts), name_);
  }

 private:
  bool AtEnd() const { return pos_ >= re_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < re_.size() ? re_[pos_ + ahead] : '\0'; }
  Status Error(std::string_view what) const {
    return InvalidArgumentError(fmt::format("regex: {} at offset {}", what, pos_));
  }

  Status ParseAlternation(std::vector<GrammarSequence>& alts, int depth) {
    if (depth > kMaxNesting) return Error("groups nested too deeply");
    alts.emplace_back();
    while (!AtEnd() && Peek() != ')') {
      if (Peek() == '|') {
        ++pos_;
        alts.emplace_back();
        continue;
      }
      if (Peek() == '$' && (pos_ + 1 == re_.size() || Peek(1) == ')' || Peek(1) == '|')) {
        // A trailing $ (of the whole regex, or of an alternative) anchors at the end: implied.
        ++pos_;
        continue;
      }
      RETURN_IF_ERROR(ParseQuantified(alts.back(), depth));
    }
    return Status::Ok();
  }

  Status ParseQuantified(GrammarSequence& seq, int depth) {
    GrammarSequence atom;
    RETURN_IF_ERROR(ParseAtom(atom, depth));
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
      } else if (op == '{' && IsBraceQuantifier()) {
        ++pos_;
        RETURN_IF_ERROR(ParseBraces(min, max));
      } else {
        break;
      }
      if (Peek() == '?') ++pos_;  // lazy: same language
      if (Peek() == '+') return Error("possessive quantifiers are not supported");
      auto rep = g_.Repeat(atom, min, max, fmt::format("{}-rep", name_));
      if (!rep.ok()) return Error(rep.status().message());
      atom = {*rep};
    }
    seq.insert(seq.end(), atom.begin(), atom.end());
    return Status::Ok();
  }

  bool IsBraceQuantifier() const {
    // {m}, {m,}, {m,n}, {,n}; anything else is a literal '{' (as in Python).
    size_t p = pos_ + 1;
    bool digits = false;
    while (p < re_.size() && re_[p] >= '0' && re_[p] <= '9') ++p, digits = true;
    if (p < re_.size() && re_[p] == ',') {
      ++p;
      while (p < re_.size() && re_[p] >= '0' && re_[p] <= '9') ++p, digits = true;
    }
    return digits && p < re_.size() && re_[p] == '}';
  }

  Status ParseBraces(int64_t& min, int64_t& max) {
    auto number = [&](int64_t& out) {
      if (!(Peek() >= '0' && Peek() <= '9')) return false;
      out = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        out = std::min<int64_t>(out * 10 + (Peek() - '0'), 1000000);
        ++pos_;
      }
      return true;
    };
    const bool has_min = number(min);
    if (Peek() == '}') {
      ++pos_;
      max = min;
      return Status::Ok();
    }
    ++pos_;  // ','
    if (!has_min) min = 0;
    if (!number(max)) max = -1;
    ++pos_;  // '}'
    return Status::Ok();
  }

  Status ParseAtom(GrammarSequence& atom, int depth) {
    const char c = Peek();
    if (c == '(') {
      ++pos_;
      if (Peek() == '?') {
        ++pos_;
        if (Peek() == ':') {
          ++pos_;
        } else if (Peek() == 'P' && Peek(1) == '<') {
          pos_ += 2;
          while (!AtEnd() && Peek() != '>') ++pos_;
          if (AtEnd()) return Error("unterminated group name");
          ++pos_;
        } else if (Peek() == '<' && Peek(1) != '=' && Peek(1) != '!') {
          ++pos_;
          while (!AtEnd() && Peek() != '>') ++pos_;
          if (AtEnd()) return Error("unterminated group name");
          ++pos_;
        } else {
          return Error("lookaround, flags and other (?...) groups are not supported");
        }
      }
      std::vector<GrammarSequence> alts;
      RETURN_IF_ERROR(ParseAlternation(alts, depth + 1));
      if (Peek() != ')') return Error("missing ')'");
      ++pos_;
      if (alts.size() == 1) {
        atom = std::move(alts[0]);
      } else {
        atom.push_back(g_.Choice(std::move(alts), fmt::format("{}-group", name_)));
      }
      return Status::Ok();
    }
    if (c == '[') {
      ++pos_;
      ASSIGN_OR_RETURN(CodePointSet set, ParseClass());
      AppendSet(set, atom);
      return Status::Ok();
    }
    if (c == '.') {
      ++pos_;
      CodePointSet set;
      set.Add(0, CodePointSet::kMaxCodePoint);
      CodePointSet nl;
      nl.Add('\n');
      AppendSet(set.Minus(nl), atom);
      return Status::Ok();
    }
    if (c == '^') return Error("'^' is only supported at the start");
    if (c == '$') return Error("'$' is only supported at the end");
    if (c == '*' || c == '+' || c == '?') return Error("nothing to repeat");
    CodePointSet set;
    if (c == '\\') {
      ASSIGN_OR_RETURN(set, ParseEscape(/*in_class=*/false));
    } else {
      uint32_t cp = 0;
      const size_t n = DecodeUtf8(re_, pos_, &cp);
      if (n == 0) return Error("invalid UTF-8");
      pos_ += n;
      set.Add(cp);
    }
    AppendSet(set, atom);
    return Status::Ok();
  }

  // After a backslash (pos_ at the backslash).
  StatusOr<CodePointSet> ParseEscape(bool in_class) {
    ++pos_;
    if (AtEnd()) return Error("trailing backslash");
    const char e = Peek();
    ++pos_;
    CodePointSet s;
    switch (e) {
      case 'd':
        return Digits();
      case 'D':
        return Digits().Complement();
      case 'w':
        return WordChars();
      case 'W':
        return WordChars().Complement();
      case 's':
        return Spaces();
      case 'S':
        return Spaces().Complement();
      case 'n':
        s.Add('\n');
        return s;
      case 't':
        s.Add('\t');
        return s;
      case 'r':
        s.Add('\r');
        return s;
      case 'f':
        s.Add('\f');
        return s;
      case 'v':
        s.Add('\v');
        return s;
      case '0':
        s.Add(0);
        return s;
      case 'x':
      case 'u': {
        const int digits = e == 'x' ? 2 : 4;
        const std::optional<uint32_t> v =
            ParseHexDigits(re_.substr(std::min(pos_, re_.size())), digits);
        if (!v) {
          // The error points at the first character that is not a hex digit.
          for (int i = 0; i < digits && std::isxdigit(static_cast<unsigned char>(Peek())); ++i)
            ++pos_;
          return Error("expected a hex digit");
        }
        pos_ += static_cast<size_t>(digits);
        s.Add(*v);
        return s;
      }
      case 'b':
        if (in_class) {
          s.Add('\b');
          return s;
        }
        return Error("word boundaries (\\b) are not supported");
      default:
        if ((e >= '1' && e <= '9') || e == 'k') return Error("backreferences are not supported");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z'))
          return Error(fmt::format("unsupported escape '\\{}'", e));
        s.Add(static_cast<uint8_t>(e));
        return s;
    }
  }

  // After '['.
  StatusOr<CodePointSet> ParseClass() {
    CodePointSet set;
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    bool first = true;
    while (!AtEnd() && (Peek() != ']' || first)) {
      first = false;
      CodePointSet item;
      bool single = false;
      uint32_t lo = 0;
      if (Peek() == '[' && Peek(1) == ':') return Error("POSIX classes are not supported");
      if (Peek() == '\\') {
        ASSIGN_OR_RETURN(item, ParseEscape(/*in_class=*/true));
        single = item.ranges().size() == 1 && item.ranges()[0].first == item.ranges()[0].second;
        if (single) lo = item.ranges()[0].first;
      } else {
        const size_t n = DecodeUtf8(re_, pos_, &lo);
        if (n == 0) return Error("invalid UTF-8");
        pos_ += n;
        single = true;
      }
      if (single && Peek() == '-' && Peek(1) != ']' && pos_ + 1 < re_.size()) {
        ++pos_;
        uint32_t hi = 0;
        if (Peek() == '\\') {
          ASSIGN_OR_RETURN(CodePointSet h, ParseEscape(/*in_class=*/true));
          if (h.ranges().size() != 1 || h.ranges()[0].first != h.ranges()[0].second)
            return Error("bad character range");
          hi = h.ranges()[0].first;
        } else {
          const size_t n = DecodeUtf8(re_, pos_, &hi);
          if (n == 0) return Error("invalid UTF-8");
          pos_ += n;
        }
        if (hi < lo) return Error("character range is out of order");
        set.Add(lo, hi);
      } else if (single) {
        set.Add(lo);
      } else {
        set.AddSet(item);
      }
    }
    if (AtEnd()) return Error("unterminated character class");
    ++pos_;
    return negated ? set.Complement() : set;
  }

  // One character of `set`, written as the context requires.
  void AppendSet(const CodePointSet& set, GrammarSequence& out) {
    if (ctx_ == RegexContext::kRaw) {
      out.push_back(set.ToSymbol(g_, fmt::format("{}-char", name_)));
      return;
    }
    // JSON string: characters that must be escaped go out as their escapes.
    std::vector<GrammarSequence> alts;
    for (const auto& [lo, hi] : set.ranges()) {
      for (uint32_t cp = lo; cp <= hi && cp < 0x20; ++cp) {
        static constexpr const char* kShort[] = {nullptr, nullptr, nullptr, nullptr, nullptr,
                                                 nullptr, nullptr, nullptr, "\\b",   "\\t",
                                                 "\\n",   nullptr, "\\f",   "\\r"};
        const char* esc = cp < 14 ? kShort[cp] : nullptr;
        alts.push_back(g_.Literal(esc ? std::string(esc) : fmt::format("\\u{:04x}", cp)));
      }
      if (lo <= '"' && hi >= '"') alts.push_back(g_.Literal("\\\""));
      if (lo <= '\\' && hi >= '\\') alts.push_back(g_.Literal("\\\\"));
    }
    CodePointSet special;
    special.Add(0, 0x1F);
    special.Add('"');
    special.Add('\\');
    const CodePointSet plain = set.Minus(special);
    if (alts.empty()) {
      out.push_back(plain.ToSymbol(g_, fmt::format("{}-char", name_)));
      return;
    }
    if (!plain.Empty()) alts.push_back({plain.ToSymbol(g_, fmt::format("{}-char", name_))});
    out.push_back(g_.Choice(std::move(alts), fmt::format("{}-jchar", name_)));
  }

  Grammar& g_;
  std::string_view re_;
  RegexContext ctx_;
  std::string name_;
  size_t pos_ = 0;
};

}  // namespace

StatusOr<GrammarSymbol> AddRegex(Grammar& g, std::string_view regex, RegexContext context,
                                 std::string_view name) {
  return RegexParser(g, regex, context, name).Parse();
}

StatusOr<Grammar> RegexToGrammar(std::string_view regex) {
  Grammar g;
  const int32_t root = g.AddRule("root");
  ASSIGN_OR_RETURN(GrammarSymbol s, AddRegex(g, regex, RegexContext::kRaw, "re"));
  g.AddAlternative(root, {s});
  g.set_root(root);
  RETURN_IF_ERROR(g.Validate().WithContext("regex"));
  return g;
}

}  // namespace pagellm
