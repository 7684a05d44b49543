// FollowSets: for every rule of an automaton, the bytes that may come right after the rule
// finishes, in any context (the textbook FOLLOW sets of a context-free grammar, over bytes).
// The token-mask cache (grammar/compiled_grammar.h) uses them to reject, at compile time, a
// token that would need to leave its rule and continue with a byte nothing can follow the rule
// with (xgrammar's context expansion). After the root rule nothing follows: its set is empty.
// Worklist fixpoints, so a hostile grammar costs O(256 x size), never a pass per chain link.
#pragma once

#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_automaton.h"

namespace pagellm {

// [rule] follow set.
std::vector<ByteSet> ComputeFollowSets(const GrammarAutomaton& automaton);

}  // namespace pagellm
