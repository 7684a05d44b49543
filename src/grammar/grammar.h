// Grammar: a context-free grammar over BYTES, the common target of every constraint kind (GBNF
// text, regular expressions, JSON Schema, choices). Terminals are byte sets (256-bit); Unicode
// character classes become alternatives of UTF-8 byte-set sequences (grammar/code_point_set.h),
// so the automaton (grammar/grammar_automaton.h) walks token bytes directly, which is what
// byte-level BPE tokens and byte-fallback pieces are made of.
//
// A rule is a list of alternatives; an alternative is a sequence of symbols (a byte set or a
// reference to a rule); the empty sequence matches the empty string. Repetition is expressed
// with helper rules (Repeat()), as llama.cpp rewrites GBNF's `*`, `+`, `?` and `{m,n}`.
//
// Validate() rejects what the automaton cannot run: references to rules without any
// alternative, left recursion (a rule reaching itself without consuming a byte, which would
// make the closure of a parser state infinite), and grammars past the size limits below.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pagellm/status.h"

namespace pagellm {

// Bytes b with bit b set.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool Contains(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void Add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  bool Empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
  static ByteSet Single(uint8_t b) {
    ByteSet s;
    s.Add(b);
    return s;
  }
};

struct GrammarSymbol {
  enum class Kind : uint8_t { kBytes, kRule };
  Kind kind;
  int32_t id;  // byte set id (Grammar::byte_set) or rule id
  bool operator==(const GrammarSymbol&) const = default;
};

using GrammarSequence = std::vector<GrammarSymbol>;

class Grammar {
 public:
  // Limits that keep a hostile grammar, regex or schema bounded in time and memory.
  static constexpr size_t kMaxRules = 100000;
  static constexpr size_t kMaxSymbols = 1000000;  // over all alternatives

  // A new rule without alternatives. `name` is made unique by a numeric suffix if taken.
  int32_t AddRule(std::string_view name);
  // The id of a rule by name, or -1.
  int32_t FindRule(std::string_view name) const;
  void AddAlternative(int32_t rule, GrammarSequence seq);

  // Symbols.
  GrammarSymbol Bytes(const ByteSet& set);
  GrammarSymbol Byte(uint8_t b) { return Bytes(ByteSet::Single(b)); }
  static GrammarSymbol Ref(int32_t rule) { return {GrammarSymbol::Kind::kRule, rule}; }
  // The bytes of `text`, one symbol each.
  GrammarSequence Literal(std::string_view text);
  // A rule matching `seq` repeated min..max times (max < 0: unbounded). Nested optionals for a
  // bounded tail, a right-recursive rule for an unbounded one (constant stack depth in the
  // automaton, which does not push a return for a reference at the end of an alternative).
  StatusOr<GrammarSymbol> Repeat(const GrammarSequence& seq, int64_t min, int64_t max,
                                 std::string_view name_hint);
  // A rule whose alternatives are `alts`.
  GrammarSymbol Choice(std::vector<GrammarSequence> alts, std::string_view name_hint);

  int32_t num_rules() const { return static_cast<int32_t>(rules_.size()); }
  const std::string& rule_name(int32_t rule) const { return rules_[rule].name; }
  const std::vector<GrammarSequence>& alternatives(int32_t rule) const { return rules_[rule].alts; }
  const ByteSet& byte_set(int32_t id) const { return byte_sets_[id]; }
  int32_t num_byte_sets() const { return static_cast<int32_t>(byte_sets_.size()); }
  size_t num_symbols() const { return num_symbols_; }

  int32_t root() const { return root_; }
  void set_root(int32_t rule) { root_ = rule; }

  // See the file comment. `source` names the input in messages ("grammar", "regex", ...).
  Status Validate() const;

  // GBNF text of the grammar (for messages, tests and debugging): byte sets print as
  // [\xNN-\xMM] classes.
  std::string ToGbnf() const;

 private:
  struct Rule {
    std::string name;
    std::vector<GrammarSequence> alts;
  };
  std::vector<Rule> rules_;
  std::vector<ByteSet> byte_sets_;
  std::unordered_map<std::string, int32_t> rule_ids_;
  std::map<std::array<uint64_t, 4>, int32_t> byte_set_ids_;
  size_t num_symbols_ = 0;
  int32_t root_ = -1;
};

}  // namespace pagellm
