// Sampling flags of the CLI (named after vLLM's SamplingParams) and JSONL field parsing.
#pragma once

#include <optional>

#include "CLI/CLI.hpp"
#include "engine/sampling_params_json.h"
#include "model/model_weights.h"
#include "pagellm/sampling_params.h"

namespace pagellm::cli {

struct SamplingFlags {
  SamplingParams params;
  // Unset ones fall back to the model's generation_config.json, then vLLM's defaults.
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;

  StatusOr<SamplingParams> Resolve(const LoadedModel& model) const;
};

void AddSamplingFlags(CLI::App& app, SamplingFlags& flags);

}  // namespace pagellm::cli
