// Parsing and validation of the speculative-decoding settings, in vLLM's two spellings:
// --speculative-config '{"method": ..., "model": ..., "num_speculative_tokens": k, ...}' and the
// older --speculative-model / --num-speculative-tokens / --speculative-max-model-len flags.
#pragma once

#include <string>

#include "pagellm/status.h"
#include "spec/speculative_config.h"

namespace pagellm {

// "" (kNone), "draft_model", "ngram": the --speculative-config spelling.
const char* SpeculativeMethodName(SpeculativeMethod method);
// The inverse of SpeculativeMethodName; anything else is InvalidArgument.
StatusOr<SpeculativeMethod> ParseSpeculativeMethod(const std::string& name);

// Merges a --speculative-config JSON object into `config` (its keys override the individual
// flags). Keys: method ("draft_model" | "ngram"), model, num_speculative_tokens, max_model_len,
// prompt_lookup_min, prompt_lookup_max. Unknown keys and wrong types are InvalidArgument.
Status MergeSpeculativeConfigJson(const std::string& json, SpeculativeConfig& config);

// Fills defaults and checks consistency: a model without a method means draft_model; ngram's
// lookup bounds default as vLLM's (both 5 when neither is given, else the one given); k in
// [1, 32] (vLLM's MAX_SPEC_LEN). A config with neither method nor model stays off.
Status ResolveSpeculativeConfig(SpeculativeConfig& config);

}  // namespace pagellm
