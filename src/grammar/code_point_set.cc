#include "grammar/code_point_set.h"

#include <algorithm>

namespace pagellm {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

// UTF-8 encoding of cp into out[0..n); returns n.
int Encode(uint32_t cp, uint8_t out[4]) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

// Splits [lo, hi] into ranges whose encodings are products of byte ranges; appends one
// sequence of (lo byte, hi byte) per piece.
void SplitUtf8(uint32_t lo, uint32_t hi,
               std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  static constexpr uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t end : kLengthEnds) {
    if (lo <= end && hi > end) {
      SplitUtf8(lo, end, out);
      SplitUtf8(end + 1, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  const int n = Encode(lo, a);
  Encode(hi, b);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitUtf8(lo, lo | m, out);
        SplitUtf8((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        SplitUtf8(lo, (hi & ~m) - 1, out);
        SplitUtf8(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out.push_back(std::move(seq));
}

}  // namespace

void CodePointSet::Add(uint32_t lo, uint32_t hi) {
  hi = std::min(hi, kMaxCodePoint);
  if (lo > hi) return;
  // Surrogates are not scalar values: cut them out.
  if (lo <= kSurrogateHi && hi >= kSurrogateLo) {
    if (lo < kSurrogateLo) ranges_.push_back({lo, kSurrogateLo - 1});
    if (hi > kSurrogateHi) ranges_.push_back({kSurrogateHi + 1, hi});
  } else {
    ranges_.push_back({lo, hi});
  }
  Normalize();
}

void CodePointSet::AddSet(const CodePointSet& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  Normalize();
}

void CodePointSet::Normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
}

CodePointSet CodePointSet::Complement() const {
  CodePointSet out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : ranges_) {
    if (lo > next) out.ranges_.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.ranges_.push_back({next, kMaxCodePoint});
  // Re-add through Add() to drop the surrogates.
  CodePointSet clean;
  for (const auto& [lo, hi] : out.ranges_) clean.Add(lo, hi);
  return clean;
}

CodePointSet CodePointSet::Minus(const CodePointSet& other) const {
  const CodePointSet keep = other.Complement();
  CodePointSet out;
  for (const auto& [lo, hi] : keep.ranges_)
    for (const auto& [alo, ahi] : ranges_) {
      const uint32_t l = std::max(lo, alo), h = std::min(hi, ahi);
      if (l <= h) out.ranges_.push_back({l, h});
    }
  out.Normalize();
  return out;
}

bool CodePointSet::Contains(uint32_t cp) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), std::make_pair(cp, UINT32_MAX));
  return it != ranges_.begin() && std::prev(it)->second >= cp;
}

GrammarSymbol CodePointSet::ToSymbol(Grammar& g, std::string_view name) const {
  ByteSet ascii;
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
  for (const auto& [lo, hi] : ranges_) {
    if (lo < 0x80)
      ascii.AddRange(static_cast<uint8_t>(lo), static_cast<uint8_t>(std::min(hi, 0x7Fu)));
    if (hi >= 0x80) SplitUtf8(std::max(lo, 0x80u), hi, seqs);
  }
  if (seqs.empty()) return g.Bytes(ascii);
  const int32_t rule = g.AddRule(name);
  if (!ascii.Empty()) g.AddAlternative(rule, {g.Bytes(ascii)});
  for (const auto& seq : seqs) {
    GrammarSequence alt;
    for (const auto& [a, b] : seq) {
      ByteSet s;
      s.AddRange(a, b);
      alt.push_back(g.Bytes(s));
    }
    g.AddAlternative(rule, std::move(alt));
  }
  return Grammar::Ref(rule);
}

std::optional<uint32_t> ParseHexDigits(std::string_view text, int digits) {
  if (text.size() < static_cast<size_t>(digits)) return std::nullopt;
  uint32_t v = 0;
  for (int i = 0; i < digits; ++i) {
    const char h = text[static_cast<size_t>(i)];
    int d;
    if (h >= '0' && h <= '9')
      d = h - '0';
    else if (h >= 'a' && h <= 'f')
      d = h - 'a' + 10;
    else if (h >= 'A' && h <= 'F')
      d = h - 'A' + 10;
    else
      return std::nullopt;
    v = v * 16 + static_cast<uint32_t>(d);
  }
  return v;
}

}  // namespace pagellm
