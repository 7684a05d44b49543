// CompiledGrammar: a grammar bound to a vocabulary, ready for token masks. Besides the
// automaton it holds, for every byte-set position of the grammar, the token sets that do not
// depend on the rest of the parser stack (xgrammar's adaptive token-mask cache, Dong et al.
// 2024): walking all tokens from the single stack [position],
//   accepted:  tokens some path consumes entirely inside the position's rule (or rules it
//              enters): allowed whatever lies below on the stack;
//   uncertain: tokens that finish the rule before their last byte: checked at run time
//              against the whole state (GrammarMatcher::FillMask);
// every other token is rejected at that position in any context; so is a token that leaves the
// rule and goes on with a byte that cannot follow the rule anywhere in the grammar
// (grammar/follow_sets.h). At run time a state's mask is the union of its tops' accepted sets
// plus the uncertain tokens that pass, which is typically a few hundred checks instead of the
// whole vocabulary. Small leaf rules are inlined into their callers first
// (grammar/rule_inliner.h), so that a position inside a repetition of characters accepts whole
// runs of characters instead of finishing a one-character rule after its first byte.
// Immutable once built; shared by every request with the same constraint (GrammarCompiler).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_automaton.h"
#include "grammar/token_vocabulary.h"

namespace pagellm {

class CompiledGrammar {
 public:
  struct PositionTokens {
    std::vector<uint64_t> accepted_bits;  // [mask_words] when dense, else empty
    std::vector<int32_t> accepted_ids;    // when sparse (fewer than mask_size / 32)
    std::vector<int32_t> uncertain;       // indices into vocab.sorted_ids(), ascending
  };

  // `grammar` must have passed Validate().
  CompiledGrammar(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocab);

  const GrammarAutomaton& automaton() const { return automaton_; }
  const TokenVocabulary& vocab() const { return *vocab_; }
  // For a kBytes position.
  const PositionTokens& position_tokens(int32_t pos) const { return positions_[pos]; }
  size_t memory_bytes() const { return memory_bytes_; }

  // Whole-state mask cache, shared by the requests of this grammar (thread-safe): `key` names a
  // parser state by the positions of all its stacks (GrammarMatcher builds it), so a state that
  // recurs (every character inside one JSON string value is the same state, thanks to tail
  // calls) costs a lookup instead of a walk. Bounded: dropped whole past kMaxStateCacheBytes.
  bool LookupMask(const std::string& key, std::span<uint64_t> mask) const;
  void StoreMask(const std::string& key, std::span<const uint64_t> mask) const;
  static constexpr size_t kMaxStateCacheBytes = size_t{64} << 20;

 private:
  GrammarAutomaton automaton_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<PositionTokens> positions_;  // [elements]; empty for non-kBytes elements
  size_t memory_bytes_ = 0;
  // A cached mask: set ids when sparse, else the words.
  struct CachedMask {
    std::vector<int32_t> ids;
    std::vector<uint64_t> words;
  };
  mutable std::mutex state_mu_;
  mutable std::unordered_map<std::string, CachedMask> state_masks_;
  mutable size_t state_bytes_ = 0;
};

}  // namespace pagellm
