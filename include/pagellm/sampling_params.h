// Per-request sampling parameters, named and defaulted as vLLM's SamplingParams.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pagellm/status.h"

namespace pagellm {

// A constraint on the generated text (vLLM's StructuredOutputsParams; OpenAI's response_format
// and llama.cpp's grammar / json_schema map onto it). Enforced by token masks from the grammar
// engine (src/grammar/); see docs/STRUCTURED_OUTPUTS.md.
struct StructuredOutputs {
  enum class Kind : uint8_t {
    kJson,        // `spec` is a JSON Schema (JSON text)
    kJsonObject,  // any JSON object
    kRegex,       // `spec` is a regular expression the whole output matches
    kChoice,      // the output is exactly one of `choice`
    kGrammar,     // `spec` is a GBNF grammar (llama.cpp's format)
  };
  Kind kind = Kind::kJsonObject;
  std::string spec;
  std::vector<std::string> choice;
  // JSON kinds: a regex for the whitespace allowed between JSON tokens (default: bounded).
  std::optional<std::string> whitespace_pattern;
  bool operator==(const StructuredOutputs&) const = default;
};

// Reasoning before a structured-output constraint (vLLM's reasoning parsers): the constraint
// applies only from the token after the reasoning's end token on, so the model reasons freely.
struct ReasoningBoundary {
  int32_t end_token = -1;      // the token that ends the reasoning (</think>)
  int32_t start_token = -1;    // >= 0: the first output token may be this one, opening reasoning
  bool starts_inside = false;  // the output begins inside the reasoning
  bool operator==(const ReasoningBoundary&) const = default;
};

struct SamplingParams {
  int n = 1;
  float temperature = 1.0f;         // 0 = greedy
  float top_p = 1.0f;               // (0, 1]
  int top_k = 0;                    // 0 or -1 = disabled
  float min_p = 0.0f;               // [0, 1]
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  float repetition_penalty = 1.0f;  // > 0; applies to prompt and output tokens
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  std::optional<int> max_tokens = 16;  // nullopt = up to max_model_len
  int min_tokens = 0;
  std::optional<int> logprobs;  // top-N logprobs of each sampled token
  std::optional<int> prompt_logprobs;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::optional<StructuredOutputs> structured_outputs;
  // With structured_outputs: where the constraint starts (none: at the first output token).
  std::optional<ReasoningBoundary> reasoning_boundary;

  // vLLM's --max-logprobs default: the most `logprobs` / `prompt_logprobs` a request may ask
  // for. -1 means "no limit" (the whole vocabulary).
  static constexpr int kDefaultMaxLogprobs = 20;

  // Checks ranges as vLLM does (SamplingParams._verify_args plus the V1 processor's vocabulary
  // and max-logprobs checks); returns InvalidArgument whose message names the field, worded as
  // vLLM's ("temperature must be non-negative, got -1.0."). `vocab_size` is the width of the
  // model's logits row (token ids must be below it); `max_logprobs` is --max-logprobs.
  // logprobs / prompt_logprobs == -1 mean "the whole vocabulary", as in newer vLLM.
  // Beyond vLLM: stop_token_ids must be in the vocabulary and logit_bias values in
  // [-100, 100] (the OpenAI range; vLLM's server clamps instead of rejecting).
  Status Validate(int32_t vocab_size, int max_logprobs = kDefaultMaxLogprobs) const;
};

}  // namespace pagellm
