// Rule inlining (xgrammar's rule inlining, Dong et al. 2024, section 3.3): a reference to a
// small rule made only of byte sets (a "leaf": one UTF-8 character of a class, an escape, a
// bounded run of digits) is replaced by that rule's alternatives in the caller, and rules no
// longer reachable from the root are dropped. The language is unchanged; what changes is the
// rule a byte-set position belongs to, which is what the token-mask cache keys on
// (grammar/compiled_grammar.h). Inside a JSON string the position of a character then lies in
// the right-recursive `chars` rule itself, so a token of many string characters is accepted
// there once for all contexts instead of finishing the one-character rule after its first
// byte and being re-checked against the whole parser state at every first visit.
// Inlining stops at kMaxHostAlternatives per rule and at a symbol budget, so a grammar's size
// grows by a bounded factor.
#pragma once

#include "grammar/grammar.h"

namespace pagellm {

// `grammar` must have passed Validate(); so does the result.
Grammar InlineLeafRules(const Grammar& grammar);

}  // namespace pagellm
