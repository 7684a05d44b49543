// Sizes the KV cache at engine start-up from the memory budget (see docs/CAPACITY_PLANNING.md).
#pragma once

#include "engine/engine_config.h"
#include "engine/engine_core.h"
#include "model/model_weights.h"

namespace pagellm {

// Blocks of the primary pool from --num-gpu-blocks-override, --kv-cache-memory or
// --gpu-memory-utilization x available memory - weights - activation peak; swap blocks from
// --swap-space when --preemption-mode swap. Refuses a max_model_len that cannot fit one
// request, naming the numbers and the largest length that would.
//
// With a speculative draft model, the draft's weights and activation peak come off the budget
// too and each block costs target + draft KV bytes (both caches have the same block count).
StatusOr<KvCacheReport> SizeKvCache(const LoadedModel& model, const EngineConfig& config,
                                    const DraftModelProposer* draft = nullptr);

}  // namespace pagellm
