// What goes into the engine (EngineRequest) and what each step gives back per request
// (EngineOutput). The server, the offline LLM and the metrics read these without the engine core.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/finish_reason.h"
#include "pagellm/outputs.h"
#include "pagellm/sampling_params.h"

namespace pagellm {

struct EngineRequest {
  std::string request_id;
  std::vector<int32_t> prompt_token_ids;
  SamplingParams params;
  int priority = 0;
  std::optional<std::string> cache_salt;
};

// What one step produced for one request.
struct EngineOutput {
  std::string request_id;
  std::vector<int32_t> new_token_ids;
  std::string new_text;  // text that became final this step (UTF-8 safe, stop strings cut)
  std::vector<TokenLogprobEntry> new_logprobs;
  // With prompt_logprobs: one entry per prompt token (the first has none: nothing precedes
  // it), delivered once, with the request's first sampled token.
  std::vector<std::optional<TokenLogprobEntry>> prompt_logprobs;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kStop;  // meaningful only when finished
  std::string stop_reason;                           // matched stop string or stop token id
  int32_t num_prompt_tokens = 0;
  int32_t num_cached_tokens = 0;
  int32_t num_preemptions = 0;
  // Set when the request could not be admitted (the engine finished it with kAbort).
  std::string error;
  // When the scheduler first gave the request tokens to compute (default-constructed until
  // then); the server's queue / prefill time metrics are measured from it.
  std::chrono::steady_clock::time_point first_scheduled_time{};
};

}  // namespace pagellm
