// Offline batch generation in vLLM's shape: LLM(config).Generate(prompts, params) returns one
// RequestOutput per prompt, in input order. All prompts go to the engine at once and are
// served with continuous batching on the caller's thread.
#pragma once

#include <functional>
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

// What Generate() has finished so far, counted as vLLM's progress bar counts: a prompt is
// finished when all n of its samples are.
struct GenerateProgress {
  int64_t num_prompts = 0;
  int64_t prompts_finished = 0;
  int64_t prompt_tokens = 0;  // prompt tokens of the finished prompts (x n, as vLLM)
  int64_t output_tokens = 0;  // generated tokens of the finished prompts
};

// Tokenizes a text prompt as the server does for completions: BOS added per the tokenizer
// config; an empty prompt becomes BOS alone.
std::vector<int32_t> TokenizePrompt(const Tokenizer& tokenizer, const std::string& text);

class LLM {
 public:
  // Called after every engine step (and once before the first). A non-OK status stops the
  // call: every request of it is aborted, stepped out of the engine (its KV blocks freed), and
  // Generate returns that status.
  using StepHook = std::function<Status(const GenerateProgress&)>;

  static StatusOr<std::unique_ptr<LLM>> Create(const EngineConfig& config);

  // `params` has one entry for all prompts or one per prompt. n > 1 fans out into n
  // independent samples (child i uses seed + i when a seed is set).
  StatusOr<std::vector<RequestOutput>> Generate(const std::vector<PromptInput>& prompts,
                                                const std::vector<SamplingParams>& params,
                                                const StepHook& on_step = nullptr);
  // TokenizePrompt with this engine's tokenizer.
  std::vector<int32_t> Tokenize(const std::string& text) const;

  EngineCore& core() { return *core_; }

 private:
  explicit LLM(std::unique_ptr<EngineCore> core) : core_(std::move(core)) {}
  // Aborts `ids` and steps until the engine has no unfinished request (their blocks freed).
  Status AbortAll(const std::vector<std::string>& ids);
  std::unique_ptr<EngineCore> core_;
  uint64_t next_id_ = 0;
};

}  // namespace pagellm
