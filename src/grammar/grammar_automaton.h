// GrammarAutomaton: a validated Grammar flattened into one element array and run as a
// nondeterministic pushdown automaton over bytes (the design of llama.cpp's GBNF sampler and of
// xgrammar's "byte-level pushdown automaton", Dong et al. 2024, arXiv 2411.15100).
//
// Layout: each alternative of each rule is a run of elements ending in kEnd; an element is a
// byte set or a rule reference. A parser stack is a list of return positions (StackArena);
// its top is always a byte-set element (the closure expands references and pops finished
// alternatives), so a parser state is a set of stacks (their top node ids) plus `can_end`:
// whether some path has finished the root (the bottom) at this point.
// A reference at the end of an alternative pushes no return position (tail call), so
// right-recursive repetition `x ::= a x | ""` runs at constant stack depth.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/stack_arena.h"

namespace pagellm {

// What one user of an automaton (a matcher, a mask-cache build) owns to run it: the stacks
// and the closure's scratch. The automaton itself is immutable and shared between threads.
struct ParserWorkspace {
  StackArena arena;
  std::vector<std::pair<int32_t, int32_t>> work;  // closure worklist of (pos, parent)
  std::vector<uint64_t> seen;                     // open-addressed (pos, parent) keys + 1
  std::vector<size_t> seen_used;                  // occupied slots of `seen`, for clearing
};

struct ParserState {
  std::vector<int32_t> tops;  // StackArena node ids, distinct
  bool can_end = false;
  bool dead() const { return tops.empty() && !can_end; }
};

class GrammarAutomaton {
 public:
  enum class Kind : uint8_t { kBytes, kRef, kEnd };
  struct Element {
    ByteSet set;        // kBytes
    int32_t rule = -1;  // kRef
    Kind kind = Kind::kEnd;
  };
  // A closure that would hold more stacks than this is cut (a grammar so ambiguous that its
  // parse would not be tractable); see Advance().
  static constexpr size_t kMaxStacks = 1 << 16;

  // `grammar` must have passed Validate().
  explicit GrammarAutomaton(const Grammar& grammar);

  // The start state: the closure of the root rule.
  void Start(ParserWorkspace& ws, ParserState* out) const;
  // A state with the single stack [pos] over the bottom (pos: a kBytes element); can_end then
  // means "the rule holding pos finished" (the token-mask cache, grammar/compiled_grammar.h).
  void StartAt(int32_t pos, ParserWorkspace& ws, ParserState* out) const;
  // Moves every stack whose top accepts `b` past it; `out` (not `in`) gets the closure.
  // Returns !out->dead().
  bool Advance(const ParserState& in, uint8_t b, ParserWorkspace& ws, ParserState* out) const;

  const Element& element(int32_t pos) const { return elements_[pos]; }
  int32_t num_elements() const { return static_cast<int32_t>(elements_.size()); }
  int32_t num_rules() const { return static_cast<int32_t>(rule_starts_.size()); }
  // First element of each alternative of `rule`.
  const std::vector<int32_t>& rule_starts(int32_t rule) const { return rule_starts_[rule]; }
  // The rule whose alternative holds element `pos`.
  int32_t rule_of(int32_t pos) const { return element_rules_[pos]; }
  int32_t root() const { return root_; }

 private:
  // Adds the closure of the items (pos, parent) in ws.work to out.
  void Close(ParserWorkspace& ws, ParserState* out) const;

  std::vector<Element> elements_;
  std::vector<std::vector<int32_t>> rule_starts_;  // [rule] first element of each alternative
  std::vector<int32_t> element_rules_;             // [elements] rule holding the element
  int32_t root_ = 0;
};

}  // namespace pagellm
