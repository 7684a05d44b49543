#include "grammar/grammar_compiler.h"

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema_converter.h"
#include "grammar/regex_converter.h"

namespace pagellm {

StatusOr<Grammar> BuildGrammar(const StructuredOutputs& spec) {
  JsonGrammarOptions json_options;
  json_options.whitespace_pattern = spec.whitespace_pattern;
  switch (spec.kind) {
    case StructuredOutputs::Kind::kJson:
      return JsonSchemaToGrammar(spec.spec, json_options);
    case StructuredOutputs::Kind::kJsonObject:
      return JsonObjectGrammar(json_options);
    case StructuredOutputs::Kind::kRegex:
      return RegexToGrammar(spec.spec);
    case StructuredOutputs::Kind::kGrammar:
      return ParseGbnf(spec.spec);
    case StructuredOutputs::Kind::kChoice: {
      if (spec.choice.empty()) return InvalidArgumentError("choice: the list is empty");
      Grammar g;
      const int32_t root = g.AddRule("root");
      for (const std::string& c : spec.choice) g.AddAlternative(root, g.Literal(c));
      g.set_root(root);
      RETURN_IF_ERROR(g.Validate());
      return g;
    }
  }
  return InvalidArgumentError("unknown structured output kind");
}

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, size_t capacity)
    : vocab_(std::move(vocab)), capacity_(std::max<size_t>(capacity, 1)) {}

std::string GrammarCompiler::Key(const StructuredOutputs& spec) {
  std::string key(1, static_cast<char>('0' + static_cast<int>(spec.kind)));
  key += std::to_string(spec.spec.size()) + ":" + spec.spec;
  for (const std::string& c : spec.choice) key += std::to_string(c.size()) + ":" + c;
  if (spec.whitespace_pattern)
    key += "ws" + std::to_string(spec.whitespace_pattern->size()) + ":" + *spec.whitespace_pattern;
  return key;
}

StatusOr<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::Compile(
    const StructuredOutputs& spec) {
  const std::string key = Key(spec);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.hits;
      return it->second->second;
    }
  }
  // Compiled outside the lock: two requests with the same new constraint may both compile it
  // (the second result replaces nothing and is dropped); others are not held up.
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(Grammar grammar, BuildGrammar(spec));
  auto compiled = std::make_shared<const CompiledGrammar>(grammar, vocab_);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.misses;
  stats_.compile_seconds += seconds;
  auto it = index_.find(key);
  if (it != index_.end()) return it->second->second;
  lru_.emplace_front(key, compiled);
  index_.emplace(key, lru_.begin());
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return std::shared_ptr<const CompiledGrammar>(compiled);
}

GrammarCompiler::Stats GrammarCompiler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace pagellm
