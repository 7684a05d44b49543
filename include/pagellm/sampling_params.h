// Per-request sampling parameters, named and defaulted as vLLM's SamplingParams.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pagellm/status.h"

namespace pagellm {

struct SamplingParams {
  int n = 1;
  float temperature = 1.0f;        // 0 = greedy
  float top_p = 1.0f;              // (0, 1]
  int top_k = 0;                   // 0 or -1 = disabled
  float min_p = 0.0f;              // [0, 1]
  float presence_penalty = 0.0f;   // [-2, 2]
  float frequency_penalty = 0.0f;  // [-2, 2]
  float repetition_penalty = 1.0f; // > 0; applies to prompt and output tokens
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  std::optional<int> max_tokens = 16;  // nullopt = up to max_model_len
  int min_tokens = 0;
  std::optional<int> logprobs;         // top-N logprobs of each sampled token
  std::optional<int> prompt_logprobs;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  std::vector<std::pair<int32_t, float>> logit_bias;

  // Checks ranges as vLLM does; the message names the field.
  Status Validate(int32_t vocab_size) const;
};

}  // namespace pagellm
