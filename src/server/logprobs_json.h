// Logprobs in the two OpenAI shapes:
//   completions: {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{tok: lp}, ...],
//                 "text_offset": [...]}
//   chat:        {"content": [{"token", "logprob", "bytes", "top_logprobs": [{...}]}]}
// Token strings are each token's decoded text ("token_id:<id>" with
// return_tokens_as_token_ids); -inf logprobs become -9999.0 as in vLLM (JSON has no -inf).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "nlohmann/json.hpp"
#include "pagellm/outputs.h"
#include "server/serving_context.h"

namespace pagellm {

// Scored prompt tokens (echo with logprobs): ids, and the engine's entries (nullopt for the
// first token, which nothing precedes). Empty when the prompt is not echoed.
struct PromptLogprobs {
  std::span<const int32_t> ids;
  std::span<const std::optional<TokenLogprobEntry>> entries;
};

// Completions logprobs for the prompt's tokens (if any), then `entries`; text_offset starts at
// `initial_offset` (characters of the choice's text before these tokens) and advances by each
// token's length.
nlohmann::ordered_json CompletionLogprobsJson(const ServingContext& ctx,
                                              const PromptLogprobs& prompt,
                                              const std::vector<TokenLogprobEntry>& entries,
                                              bool tokens_as_ids, size_t initial_offset);

// vLLM's prompt_logprobs field: [null, {"<id>": {"logprob", "rank", "decoded_token"}, ...}, ...]
// with the prompt token and its top alternatives at each position. Ranks are known for the
// alternatives (1 = most likely); the prompt token's is null unless it is among them.
nlohmann::ordered_json PromptLogprobsJson(
    const ServingContext& ctx, std::span<const std::optional<TokenLogprobEntry>> entries);

// The "content" list of chat logprobs, each with at most `num_top` alternatives.
nlohmann::ordered_json ChatLogprobsContent(const ServingContext& ctx,
                                           const std::vector<TokenLogprobEntry>& entries,
                                           int num_top, bool tokens_as_ids);

}  // namespace pagellm
