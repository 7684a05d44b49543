// CodePointSet: a set of Unicode scalar values (character classes of GBNF and regexes, JSON
// string characters) and its translation to the byte-level grammar: one UTF-8 encoded
// character of the set becomes alternatives of byte-set sequences, split at the UTF-8 length
// and continuation-byte boundaries so that each sequence is a product of byte ranges (the
// classic construction of UTF-8 range automata, as in RE2 and Rust's utf8-ranges).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace pagellm {

class CodePointSet {
 public:
  static constexpr uint32_t kMaxCodePoint = 0x10FFFF;

  void Add(uint32_t lo, uint32_t hi);  // inclusive; surrogates are never members
  void Add(uint32_t cp) { Add(cp, cp); }
  void AddSet(const CodePointSet& other);
  // Every scalar value not in the set.
  CodePointSet Complement() const;
  // Members of this set that are not in `other`.
  CodePointSet Minus(const CodePointSet& other) const;
  bool Contains(uint32_t cp) const;
  bool Empty() const { return ranges_.empty(); }
  // Sorted, disjoint, non-adjacent inclusive ranges.
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

  // One character of the set, UTF-8 encoded: a byte set when every member is ASCII, else a
  // new rule named `name`. An empty set gives a rule that matches nothing (an empty byte set).
  GrammarSymbol ToSymbol(Grammar& g, std::string_view name) const;

 private:
  void Normalize();
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

// The value of the `digits` hex digits that start `text` (the HH of an escape \xHH, \uHHHH,
// \UHHHHHHHH in GBNF and regexes); nullopt when text is shorter or one is not a hex digit.
std::optional<uint32_t> ParseHexDigits(std::string_view text, int digits);

}  // namespace pagellm
