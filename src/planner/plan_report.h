// Renderings of a MemoryPlan for `pagellm plan`: one JSON object and an aligned text table.
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "planner/memory_plan.h"

namespace pagellm {

// Every field of the plan, bytes as integers: weights_bytes, weights_bytes_per_device,
// activation_bytes, kv_bytes_per_token, kv_bytes_per_block, kv_bytes_per_request, num_blocks,
// num_blocks_allocated, num_tokens, max_concurrency, fits, max_model_len_that_fits, ... and the
// deployment (device, memory, utilization, tensor parallel size, dtype, block size).
nlohmann::json PlanToJson(const MemoryPlan& plan);

// Human-readable table, one "label  value" line per quantity, sizes also in GiB/MiB.
std::string PlanTable(const MemoryPlan& plan);

}  // namespace pagellm
