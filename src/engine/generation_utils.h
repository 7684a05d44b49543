// Small conversions shared by the engine core and the single-request generator, so both paths
// report logprobs, stop reasons and stop tokens the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "pagellm/outputs.h"
#include "sample/sampler.h"
#include "sample/stop_checker.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

// A sampled (or scored) token's logprob entry as the outputs carry it.
TokenLogprobEntry ToLogprobEntry(const SampleResult& s);

// The matched stop string, or the stop token id as text; empty when none.
std::string StopReasonText(const StopReason& reason);

// Ids that end generation by default: the tokenizer's stop ids plus the model config's eos ids
// and the tokenizer's EOS, without duplicates. `eos_id` receives the primary EOS (-1 if none).
// `tokenizer` may be null (models without one: the config's first eos id is the EOS).
std::vector<int32_t> DefaultStopTokenIds(const Tokenizer* tokenizer, const ModelConfig& config,
                                         int32_t* eos_id);

}  // namespace pagellm
