// The request fields the completions and chat endpoints share: sampling parameters (OpenAI's
// and vLLM's extras), streaming options, scheduling extras, and the checks vLLM applies to
// them. Fields we cannot honour are refused with a 400 rather than silently ignored; fields
// nobody reads (user, metadata, ...) are ignored with a warning, as vLLM does.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "nlohmann/json.hpp"
#include "pagellm/sampling_params.h"
#include "server/serving_context.h"

namespace pagellm {

enum class Endpoint { kCompletions, kChat };

struct RequestOptions {
  SamplingParams params;  // n is the client's n; engine requests get n = 1
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  bool continuous_usage_stats = false;  // stream_options.continuous_usage_stats (vLLM)
  bool echo = false;
  bool return_prompt_logprobs = false;  // the client asked for prompt_logprobs
  bool return_tokens_as_token_ids = false;
  int priority = 0;
  std::optional<std::string> cache_salt;
  std::optional<int> truncate_prompt_tokens;  // keep only the last k prompt tokens
  bool add_special_tokens = true;             // completions: true, chat: false
};

StatusOr<RequestOptions> ParseRequestOptions(const nlohmann::json& body, Endpoint endpoint,
                                             const ServingContext& ctx);

// Logs (once per request) the fields this endpoint does not know, which are ignored.
void WarnIgnoredFields(const nlohmann::json& body, Endpoint endpoint);

// The most prompt tokens worth tokenizing in full for this request (ServingContext::Tokenize):
// max_model_len - 1 (one token must be left for the output), or none when the request asks
// for truncate_prompt_tokens (a longer prompt is then legitimate: its last k tokens are kept).
std::optional<int64_t> PromptTokenLimit(const RequestOptions& options, const ServingContext& ctx);

// vLLM's 400 for an explicit max_tokens (or max_completion_tokens) that does not fit in the
// context left after a prompt: "'max_tokens' or 'max_completion_tokens' is too large: ...".
Status CheckMaxTokens(const nlohmann::json& body, const std::vector<std::vector<int32_t>>& prompts,
                      int32_t max_model_len);

// Applies truncate_prompt_tokens (keep the last k tokens of each prompt).
void TruncatePrompts(std::vector<std::vector<int32_t>>* prompts, const RequestOptions& options);

// n engine requests per prompt: ids "<id>" for a single one, else "<id>-<choice index>";
// sample i of a seeded request gets seed + i, so the samples differ but repeat exactly.
std::vector<EngineRequest> FanOut(const std::string& id,
                                  const std::vector<std::vector<int32_t>>& prompts,
                                  const RequestOptions& options);

// vLLM's stop_reason: null, the stop string, or the stop token id (an integer).
nlohmann::ordered_json StopReasonJson(const std::string& stop_reason, const SamplingParams& params);

// The usage object: prompt / completion / total tokens and prompt_tokens_details.cached_tokens.
nlohmann::ordered_json UsageJson(int64_t prompt_tokens, int64_t completion_tokens,
                                 int64_t cached_tokens);

}  // namespace pagellm
