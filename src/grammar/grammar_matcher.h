// GrammarMatcher: one request's position in a compiled grammar. Accepts tokens (and EOS where
// the grammar may end), fills the bitmask of allowed next tokens, and rolls back accepted
// tokens (speculative verification tries drafts and takes back what the target rejects).
// Not thread-safe; the CompiledGrammar it reads is shared and immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/token_walker.h"

namespace pagellm {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances over `token` if the grammar allows it there (EOS: where the grammar may end);
  // otherwise returns false and changes nothing.
  bool AcceptToken(int32_t token);
  // Advances over raw bytes (tests and tools; no token boundaries involved). False: rejected,
  // state unchanged.
  bool AcceptBytes(std::string_view bytes);
  // Takes back the last n accepted tokens (or AcceptBytes calls); n <= num_accepted().
  void Rollback(int n);
  int num_accepted() const { return static_cast<int>(history_.size()) - 1; }

  // Whether the text so far is a complete match.
  bool CanEnd() const { return state().can_end; }
  // EOS was accepted, or the grammar is complete and admits no further byte.
  bool IsTerminated() const { return terminated_.back() || (state().tops.empty() && CanEnd()); }

  // Sets bit id of `mask` (vocab().mask_words() words) for every token allowed next: tokens
  // the grammar accepts, EOS ids where it may end. All zero once terminated.
  void FillMask(std::span<uint64_t> mask);

  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  const ParserState& state() const { return history_.back(); }
  // The state's cache key (CompiledGrammar::LookupMask): its stacks as position chains, sorted.
  void BuildStateKey(const ParserState& s);
  // The mask of `s` from the per-position tables and a walk over the uncertain tokens.
  void ComputeMask(const ParserState& s, std::span<uint64_t> mask);
  // Advances `from` over `bytes` into next_ in the main arena; false when a byte is rejected.
  bool AdvanceBytes(const ParserState& from, std::string_view bytes);

  std::shared_ptr<const CompiledGrammar> grammar_;
  ParserWorkspace ws_;
  std::vector<ParserState> history_;  // [accepted + 1] state after each accepted token
  std::vector<uint8_t> terminated_;   // [accepted + 1] EOS accepted at that point
  // Scratch.
  ParserState next_, tmp_;
  TokenWalker walker_;
  std::vector<int32_t> positions_;
  std::vector<int32_t> uncertain_;
  std::string key_;
  std::vector<std::string> chains_;
};

}  // namespace pagellm
