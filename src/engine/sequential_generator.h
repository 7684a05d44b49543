// Runs one request at a time to completion on a ModelSession: prefill (in chunks), then one
// decode step per token, with vLLM's sampling and stop semantics. The reference path for
// `pagellm generate --prompt` and the "one at a time" side of batching invariance tests.
#pragma once

#include <functional>
#include <span>
#include <string>

#include "engine/model_session.h"
#include "pagellm/outputs.h"
#include "pagellm/sampling_params.h"
#include "sample/sampler.h"
#include "sample/sampler_state.h"

namespace pagellm {

class SequentialGenerator {
 public:
  // max_chunk_tokens bounds how many prompt tokens one forward pass takes.
  SequentialGenerator(ModelSession* session, uint64_t engine_seed = 0, int max_chunk_tokens = 2048);

  // Called with each piece of final text as it is produced (may be empty-free).
  using StreamFn = std::function<void(const std::string& text_delta)>;

  StatusOr<CompletionOutput> Generate(std::span<const int32_t> prompt_ids,
                                      const SamplingParams& params, const StreamFn& on_text = {});

 private:
  ModelSession* session_;
  SeedSource seeds_;
  int max_chunk_tokens_;
  Sampler sampler_;
};

}  // namespace pagellm
