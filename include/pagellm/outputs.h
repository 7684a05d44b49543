// Results of generation, shaped like vLLM's CompletionOutput / RequestOutput.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pagellm {

struct TokenLogprobEntry {
  int32_t token_id = 0;
  float logprob = 0;
  // 1-based rank of token_id among the vocabulary's logprobs (vLLM's Logprob.rank).
  int32_t rank = 0;
  // Top-N alternatives (including the chosen token when it is among them), best first.
  std::vector<std::pair<int32_t, float>> top;
};

struct CompletionOutput {
  int index = 0;
  std::string text;
  std::vector<int32_t> token_ids;
  std::string finish_reason;  // "stop", "length", "abort"
  // The stop string or stop token id that ended generation (empty when none).
  std::string stop_reason;
  std::vector<TokenLogprobEntry> logprobs;  // empty unless logprobs were requested
};

struct RequestOutput {
  std::string request_id;
  std::string prompt;
  std::vector<int32_t> prompt_token_ids;
  // With prompt_logprobs: one entry per prompt token; the first is empty (no context).
  std::vector<std::optional<TokenLogprobEntry>> prompt_logprobs;
  std::vector<CompletionOutput> outputs;
  int num_cached_tokens = 0;
  bool finished = false;
};

}  // namespace pagellm
