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
StatusOr<KvCacheReport> SizeKvCache(const LoadedModel& model, const EngineConfig& config);

}  // namespace pagellm
