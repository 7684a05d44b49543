// Offline batch generation in vLLM's shape: LLM(config).Generate(prompts, params) returns one
// RequestOutput per prompt, in input order. All prompts go to the engine at once and are
// served with continuous batching on the caller's thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "pagellm/outputs.h"
#include "pagellm/sampling_params.h"

namespace pagellm {

struct PromptInput {
  std::string text;                // used when token_ids is empty
  std::vector<int32_t> token_ids;  // pre-tokenized prompt
  int priority = 0;
  // Isolates this prompt's prefix-cache entries (vLLM's cache_salt): only prompts with the
  // same salt share cached blocks.
  std::optional<std::string> cache_salt;
};

class LLM {
 public:
  static StatusOr<std::unique_ptr<LLM>> Create(const EngineConfig& config);

  // `params` has one entry for all prompts or one per prompt. n > 1 fans out into n
  // independent samples (child i uses seed + i when a seed is set).
  StatusOr<std::vector<RequestOutput>> Generate(const std::vector<PromptInput>& prompts,
                                                const std::vector<SamplingParams>& params);
  // Tokenizes as the server does for completions: BOS added per the tokenizer config; an empty
  // prompt becomes BOS alone.
  std::vector<int32_t> Tokenize(const std::string& text) const;

  EngineCore& core() { return *core_; }

 private:
  explicit LLM(std::unique_ptr<EngineCore> core) : core_(std::move(core)) {}
  std::unique_ptr<EngineCore> core_;
  uint64_t next_id_ = 0;
};

}  // namespace pagellm
