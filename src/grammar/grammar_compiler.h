// GrammarCompiler: StructuredOutputs -> CompiledGrammar for one vocabulary, with a bounded LRU
// cache keyed by the constraint (kind, text, choices, whitespace pattern), so that repeated
// schemas (every request of an application sends the same one) compile once. Thread-safe:
// the server validates (and so compiles) requests on its own threads, off the engine loop,
// and the engine fetches the cached result when the request is added.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar.h"
#include "grammar/token_vocabulary.h"
#include "pagellm/sampling_params.h"
#include "pagellm/status.h"

namespace pagellm {

// The grammar of a constraint (no vocabulary involved); InvalidArgument names what is wrong.
StatusOr<Grammar> BuildGrammar(const StructuredOutputs& spec);

class GrammarCompiler {
 public:
  struct Stats {
    int64_t hits = 0;
    int64_t misses = 0;
    double compile_seconds = 0.0;  // total over misses
  };

  explicit GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, size_t capacity = 64);

  StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(const StructuredOutputs& spec);
  Stats stats() const;
  const TokenVocabulary& vocab() const { return *vocab_; }

 private:
  static std::string Key(const StructuredOutputs& spec);

  std::shared_ptr<const TokenVocabulary> vocab_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru_;  // newest first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  Stats stats_;
};

}  // namespace pagellm
