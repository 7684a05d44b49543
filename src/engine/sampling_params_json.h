// Reading SamplingParams from JSON objects that use vLLM / OpenAI field names (JSONL batch
// input, HTTP request bodies), and applying a model's generation_config defaults.
#pragma once

#include "model/model_weights.h"
#include "nlohmann/json.hpp"
#include "pagellm/sampling_params.h"
#include "pagellm/status.h"

namespace pagellm {

// Fields: n, temperature, top_p, top_k, min_p, presence_penalty, frequency_penalty,
// repetition_penalty, seed, stop (string or list), stop_token_ids, ignore_eos, max_tokens
// (or max_completion_tokens), min_tokens, logprobs (int, or bool with top_logprobs),
// prompt_logprobs, include_stop_str_in_output, skip_special_tokens, logit_bias ({"id": bias}),
// and a structured-output constraint in any of its spellings (engine/structured_outputs_json.h).
// Unset fields keep `defaults`. Wrong JSON types are InvalidArgument naming the field.
StatusOr<SamplingParams> ParseSamplingParams(const nlohmann::json& body,
                                             const SamplingParams& defaults);

// vLLM applies generation_config.json values as the defaults of unset sampling fields.
SamplingParams DefaultSamplingParams(const LoadedModel& model);

}  // namespace pagellm
