// The server's sampling defaults, as vLLM's --generation-config and
// --override-generation-config choose them:
//   "auto"  the model's generation_config.json (temperature, top_p, top_k, min_p,
//           repetition_penalty, max_new_tokens) over vLLM's defaults;
//   "vllm"  vLLM's defaults alone;
//   DIR     DIR/generation_config.json instead of the model's;
// then the override's JSON object on top. max_new_tokens caps every request's output.
#pragma once

#include <optional>
#include <string>

#include "model/model_weights.h"
#include "pagellm/sampling_params.h"
#include "pagellm/status.h"

namespace pagellm {

struct GenerationDefaults {
  SamplingParams params;              // request defaults (max_tokens unset)
  std::optional<int> max_new_tokens;  // server-wide cap on output tokens
};

StatusOr<GenerationDefaults> ResolveGenerationDefaults(const std::string& mode,
                                                       const std::string& override_json,
                                                       const LoadedModel& model);

}  // namespace pagellm
