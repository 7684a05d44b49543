// KV-cache capacity planning with vLLM's semantics, as pure arithmetic (no I/O).
//
// Per device (tensor-parallel rank of a pipeline stage):
//   usable           = floor(device_memory x gpu_memory_utilization)
//   KV budget        = usable - weights_per_device - activation_peak, or --kv-cache-memory
//   KV bytes/token   = 2 x stage layers x kv_heads_per_device x (head_dim x dtype bytes + scale
//                      bytes), for the stage whose layers take the most
//   bytes per block  = KV bytes/token x block_size
//   num_blocks       = floor(KV budget / bytes per block), or --num-gpu-blocks-override
//   blocks/request   = ceil(max_model_len / block_size)
//   max concurrency  = num_blocks / blocks per request  (vLLM V1's "Maximum concurrency for N
//                      tokens per request"; = num_blocks x block_size / max_model_len when
//                      block_size divides max_model_len)
//
// num_blocks counts usable blocks. vLLM's num_gpu_blocks is the same floor, but its block pool
// then takes block 0 out as the null block; pagellm's engine allocates the null block on top, so
// it allocates num_blocks_allocated = num_blocks + 1 blocks and every one of the num_blocks
// blocks can hold tokens. The extra block (one block's bytes) is reported in
// kv_cache_bytes_allocated.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/kv_cache_dtype.h"
#include "model/model_config.h"
#include "pagellm/status.h"
#include "planner/model_footprint.h"

namespace pagellm {

// Block ids are int32 in the engine and block 0 is the null block.
inline constexpr int64_t kMaxPlannedBlocks = int64_t{INT32_MAX} - 1;

struct PlanInput {
  ModelConfig model;
  std::string device_name;       // for messages ("A100-80GB", "CPU", "custom")
  int tensor_parallel_size = 1;  // devices; weights and KV heads split across them
  // Pipeline stages (model/pipeline_stage.h): tensor_parallel_size devices each, every stage
  // holding its layers' weights and KV; layers per stage as PartitionLayers makes them from
  // layer_partition (empty: vLLM's rule). KV cache groups cannot be planned across stages.
  int pipeline_parallel_size = 1;
  std::vector<int> layer_partition;
  int64_t device_memory_bytes = 0;      // per device
  double gpu_memory_utilization = 0.9;  // fraction of device memory for weights+activations+KV
  WeightsFootprint weights;             // total and per device
  int64_t activation_bytes = 0;         // activation peak per device
  KvElementFormat kv_format;            // resolved --kv-cache-dtype
  int block_size = 16;                  // tokens per block, 1..256
  int64_t max_model_len = 0;            // tokens of one request (prompt + output)
  std::optional<int64_t> kv_cache_memory_bytes;    // KV budget per device; ignores utilization
  std::optional<int64_t> num_gpu_blocks_override;  // usable blocks; ignores the budget
  // A bound on the budget derived from the device memory (not applied to kv_cache_memory_bytes
  // or the override): memory free on the device when planning (MemAvailable on a host); the
  // budget is at most free - weights - activations - free_memory_headroom_bytes. The CPU plan
  // sets it (cpu_plan.h); GPU plans leave it unset, as vLLM does for a GPU the server has to
  // itself.
  std::optional<int64_t> free_memory_bytes;
  int64_t free_memory_headroom_bytes = 0;
  // KV cache groups (kv/kv_cache_groups.h) of an engine that frees the blocks sliding-window
  // layers no longer see: each group's window (0: full attention) and the layers per group
  // (one pool block holds that many layers). Empty: one full-attention group of every layer.
  std::vector<int32_t> kv_group_windows;
  int kv_layers_per_group = 0;
};

struct MemoryPlan {
  PlanInput input;  // as given (the plan is self-describing)

  // Memory per device, bytes.
  int64_t usable_memory_bytes = 0;  // device memory x utilization
  int64_t weights_bytes = 0;        // whole model
  int64_t weights_bytes_per_device = 0;
  int64_t activation_bytes = 0;
  int64_t kv_cache_budget_bytes = 0;  // may be negative when weights do not fit
  bool budget_from_kv_cache_memory = false;
  // Why the budget is below usable - weights - activations ("" when it is not): the
  // free-memory bound of PlanInput, in words.
  std::string kv_budget_capped_by;

  // KV geometry.
  int kv_heads_per_device = 0;
  int kv_layers_per_device = 0;    // the layers of the stage whose KV per token is largest
  int64_t kv_bytes_per_token = 0;  // whole model: 2 x layers x kv_heads x head_dim x b
  // One rank (replicated heads counted per rank; the largest stage's layers).
  int64_t kv_bytes_per_token_per_device = 0;
  // One rank, block_size tokens of every layer, or of kv_layers_per_group layers with groups.
  int64_t kv_bytes_per_block = 0;
  // ceil(max_model_len / block_size); with groups, over all groups while decoding: full
  // groups ceil(max_model_len / block_size) each, window groups
  // min(that, ceil((window - 1) / block_size) + 1) each (BlocksPerRequest).
  int64_t blocks_per_request = 0;
  int64_t kv_bytes_per_request = 0;  // whole model, blocks_per_request whole blocks
  int64_t kv_bytes_per_request_per_device = 0;

  // Blocks (the same count on every rank).
  int64_t num_blocks = 0;  // usable blocks
  bool num_blocks_from_override = false;
  int64_t num_blocks_allocated = 0;      // num_blocks + the null block: what the engine allocates
  int64_t kv_cache_bytes_allocated = 0;  // per device, num_blocks_allocated x bytes per block
  int64_t num_tokens = 0;                // num_blocks x block_size (/ number of groups with groups)
  double max_concurrency = 0;            // requests of max_model_len tokens held at once
  int64_t total_bytes_per_device = 0;    // weights + activations + allocated KV

  bool fits = false;                    // one request of max_model_len fits
  int64_t max_model_len_that_fits = 0;  // largest length <= max_model_len that fits
  std::vector<std::string> warnings;
};

// Validates the input (InvalidArgument naming the flag) and computes the plan. A plan in which
// a request of max_model_len does not fit is still returned (fits == false) so that reports can
// show its numbers; CheckPlanFits turns it into the start-up refusal.
StatusOr<MemoryPlan> ComputeMemoryPlan(const PlanInput& input);

// OK when fits; otherwise ResourceExhausted with vLLM's kind of message: the KV bytes one
// request of max_model_len needs, the KV memory available, and the largest max_model_len that
// would fit.
Status CheckPlanFits(const MemoryPlan& plan);

// ComputeMemoryPlan then CheckPlanFits: what an engine calls before allocating.
StatusOr<MemoryPlan> PlanMemory(const PlanInput& input);

// Largest n in [0, upper] with fits(n), for a predicate that is monotone (true up to some
// length, false after); binary search, as vLLM estimates the max model length. 0 if none.
int64_t LargestFittingLength(int64_t upper, const std::function<bool(int64_t)>& fits);

// Start-up log lines: weights, activation peak, KV bytes per token, blocks, tokens they hold,
// maximum concurrency at max_model_len, then any warnings.
std::vector<std::string> PlanSummaryLines(const MemoryPlan& plan);

}  // namespace pagellm
