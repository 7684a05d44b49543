#include "grammar/integer_range.h"

#include <algorithm>
#include <string>
#include <vector>

#include "fmt/format.h"

namespace pagellm {
namespace {

constexpr int64_t kLimit = 1000000000000000000LL;  // 10^18

class RangeBuilder {
 public:
  explicit RangeBuilder(Grammar& g) : g_(g) {}

  GrammarSymbol Digits(char lo, char hi) {
    ByteSet s;
    s.AddRange(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
    return g_.Bytes(s);
  }

  // Same-length decimal strings a <= b (leading zeros allowed inside): alternatives appended.
  void SameLength(std::string_view a, std::string_view b, GrammarSequence prefix,
                  std::vector<GrammarSequence>& out) {
    if (a.empty()) {
      out.push_back(std::move(prefix));
      return;
    }
    if (a[0] == b[0]) {
      prefix.push_back(Digits(a[0], a[0]));
      SameLength(a.substr(1), b.substr(1), std::move(prefix), out);
      return;
    }
    const std::string_view ar = a.substr(1), br = b.substr(1);
    const bool a_zeros = std::all_of(ar.begin(), ar.end(), [](char c) { return c == '0'; });
    const bool b_nines = std::all_of(br.begin(), br.end(), [](char c) { return c == '9'; });
    char start = a[0], end = b[0];
    if (!a_zeros) {
      GrammarSequence p = prefix;
      p.push_back(Digits(a[0], a[0]));
      SameLength(ar, std::string(ar.size(), '9'), std::move(p), out);
      ++start;
    }
    if (!b_nines) --end;
    if (start <= end) {
      GrammarSequence p = prefix;
      p.push_back(Digits(start, end));
      for (size_t i = 0; i < ar.size(); ++i) p.push_back(Digits('0', '9'));
      out.push_back(std::move(p));
    }
    if (!b_nines) {
      GrammarSequence p = prefix;
      p.push_back(Digits(b[0], b[0]));
      SameLength(std::string(br.size(), '0'), br, std::move(p), out);
    }
  }

  // 0 <= a <= b.
  void Range(int64_t a, int64_t b, std::vector<GrammarSequence>& out) {
    if (a == 0) {
      out.push_back({Digits('0', '0')});
      if (b == 0) return;
      a = 1;
    }
    std::string sa = std::to_string(a);
    const std::string sb = std::to_string(b);
    while (sa.size() < sb.size()) {
      SameLength(sa, std::string(sa.size(), '9'), {}, out);
      sa = "1" + std::string(sa.size(), '0');
    }
    SameLength(sa, sb, {}, out);
  }

  // x >= a >= 0, no upper bound.
  StatusOr<std::vector<GrammarSequence>> AtLeast(int64_t a, std::string_view name) {
    std::vector<GrammarSequence> out;
    if (a == 0) {
      out.push_back({Digits('0', '0')});
      a = 1;
    }
    const std::string sa = std::to_string(a);
    SameLength(sa, std::string(sa.size(), '9'), {}, out);
    // Every number with more digits than a.
    GrammarSequence longer{Digits('1', '9')};
    ASSIGN_OR_RETURN(GrammarSymbol rest,
                     g_.Repeat({Digits('0', '9')}, static_cast<int64_t>(sa.size()), -1, name));
    longer.push_back(rest);
    out.push_back(std::move(longer));
    return out;
  }

 private:
  Grammar& g_;
};

}  // namespace

StatusOr<GrammarSymbol> IntegerRange(Grammar& g, std::optional<int64_t> lo,
                                     std::optional<int64_t> hi, std::string_view name) {
  if (lo) lo = std::clamp(*lo, -kLimit, kLimit);
  if (hi) hi = std::clamp(*hi, -kLimit, kLimit);
  if (lo && hi && *lo > *hi)
    return InvalidArgumentError(fmt::format("integer range [{}, {}] is empty", *lo, *hi));
  RangeBuilder b(g);
  std::vector<GrammarSequence> alts;
  const std::string digits_name = fmt::format("{}-digits", name);
  // Negative part: -x with x in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const int64_t nlo = hi ? std::max<int64_t>(1, -*hi) : 1;
    std::vector<GrammarSequence> neg;
    if (lo) {
      if (nlo <= -*lo) b.Range(nlo, -*lo, neg);
    } else {
      ASSIGN_OR_RETURN(neg, b.AtLeast(nlo, digits_name));
    }
    for (GrammarSequence& s : neg) {
      s.insert(s.begin(), g.Byte('-'));
      alts.push_back(std::move(s));
    }
  }
  // Non-negative part: [max(lo, 0), hi].
  if (!hi || *hi >= 0) {
    const int64_t plo = lo ? std::max<int64_t>(*lo, 0) : 0;
    if (hi) {
      b.Range(plo, *hi, alts);
    } else {
      ASSIGN_OR_RETURN(std::vector<GrammarSequence> pos, b.AtLeast(plo, digits_name));
      for (GrammarSequence& s : pos) alts.push_back(std::move(s));
    }
  }
  return g.Choice(std::move(alts), name);
}

}  // namespace pagellm
