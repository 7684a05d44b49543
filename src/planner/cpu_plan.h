// KV-cache sizing of the CPU engine: the one function the engine calls before allocating its
// cache, and the one `pagellm plan --gpu CPU` prints, so both agree by construction.
//
// The "device" is this host: its memory is AvailableHostMemoryBytes() (MemTotal capped by
// cgroup limits), scaled by --gpu-memory-utilization, minus the weights as loaded and the
// backend's activation scratch for one step of max_num_batched_tokens tokens; unlike on a GPU,
// the budget is further bounded by the memory free at start-up less a headroom
// (CpuKvOptions::host_free_bytes), because the host is shared with other processes.
//
// Split across tp x pp ranks (tensor and pipeline parallelism), the plan is per device, a
// device being one rank and 1/(tp x pp) of this host (pagellm starts every rank on the machine
// it runs on): host memory, free memory and headroom are divided among the ranks, the weights
// are the largest rank's (RankWeightBytes), a block holds one rank's KV heads of its stage's
// layers, and every rank allocates the same number of blocks.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/kv_cache_dtype.h"
#include "kv/kv_cache_groups.h"
#include "kv/kv_cache_storage.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "pagellm/status.h"
#include "planner/memory_plan.h"
#include "sched/scheduler_config.h"

namespace pagellm {

struct CpuKvOptions {
  double gpu_memory_utilization = 0.9;             // fraction of the host memory available to us
  std::optional<int64_t> kv_cache_memory;          // KV budget in bytes; utilization ignored
  std::optional<int64_t> num_gpu_blocks_override;  // usable blocks; budget ignored
  int block_size = 16;
  int64_t max_model_len = 0;  // 0: the model's max_position_embeddings
  int64_t max_num_batched_tokens = SchedulerConfig{}.max_num_batched_tokens;
  int64_t max_num_seqs = SchedulerConfig{}.max_num_seqs;
  // --kv-cache-dtype; "auto" resolves to the model dtype (AutoKvCacheDtype).
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  std::vector<int> kv_cache_dtype_skip_layers;
  // < 0: CpuActivationBytes(config, max_num_batched_tokens, max_num_seqs); the engine may pass
  // its own figure instead.
  int64_t activation_bytes = -1;
  // 0: AvailableHostMemoryBytes(). Tests set it to make plans independent of the host.
  int64_t host_memory_bytes = 0;
  // The memory free now, which bounds the default budget (no bound with kv_cache_memory or
  // num_gpu_blocks_override): budget <= free - weights - activations - headroom, headroom =
  // max(1 GiB, host memory / 10), so the cache never takes memory other processes hold.
  // nullopt: FreeHostMemoryBytes(), except when host_memory_bytes is injected (a plan for
  // another host is not bounded by this one's free memory).
  std::optional<int64_t> host_free_bytes;
  // Free the KV blocks that sliding-window layers no longer see (KV cache groups,
  // CpuKvCacheGroups). Off where block tables must be single full tables: beside a draft
  // model (it reads the target's table) and under tensor or pipeline parallelism.
  bool free_kv_outside_windows = true;
  // The split: ranks per stage, stages and layers per stage (PlanInput's), and the weight bytes
  // of the largest rank (unset: the whole model's, one rank).
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
  std::vector<int> layer_partition;
  std::optional<int64_t> weights_bytes_per_device;
};

// The KV cache groups (kv/kv_cache_groups.h) of the CPU engine for `config` with KV format
// `format`: from the layers' sliding windows when allow_windows, the model has a windowed layer
// and every layer is stored in one dtype (no --kv-cache-dtype-skip-layers); one full-attention
// group of all layers otherwise.
KvCacheGroups CpuKvCacheGroups(const ModelConfig& config, const KvElementFormat& format,
                               bool allow_windows);

// The activation figure used when CpuKvOptions::activation_bytes < 0: the CPU backend's
// scratch for T = max_num_batched_tokens tokens,
//   T x (3 x hidden + 2 x q_dim + 2 x kv_dim + 2 x intermediate) floats
//     + R x (hidden + vocab) floats,  R = max_num_seqs rows that need logits (at most one per
//                                      running request; prompt logprobs are not counted),
// as computed by BackendActivationBytes for the CPU backend (4-byte floats).
int64_t CpuActivationBytes(const ModelConfig& config, int64_t max_num_batched_tokens,
                           int64_t max_num_seqs);

// Plans the CPU KV cache. `weights_bytes` is LoadedModel::weights.total_bytes (the bytes the
// weights occupy as loaded). Errors: InvalidArgument for bad options, ResourceExhausted (vLLM-style
// message with the largest max_model_len that fits) when one request of max_model_len does not fit.
StatusOr<MemoryPlan> PlanCpuKvCache(const ModelConfig& config, int64_t weights_bytes,
                                    const CpuKvOptions& options);

// Same plan without the refusal: the plan is returned even when a request does not fit (for
// reports); option errors are still errors.
StatusOr<MemoryPlan> ComputeCpuKvPlan(const ModelConfig& config, int64_t weights_bytes,
                                      int64_t num_parameters, const CpuKvOptions& options);

// A speculative draft model served beside the target: it has its own paged KV cache with the
// same block count as the target's (its block tables are the target's), so it takes weights,
// activation scratch and KV bytes per token from the same budget.
struct DraftFootprint {
  int64_t weights_bytes = 0;       // as loaded
  int64_t activation_bytes = 0;    // CPU backend scratch for one step
  int64_t kv_bytes_per_token = 0;  // the draft's cache, all layers
};

// The draft's footprint from its config and loaded weight bytes: CpuActivationBytes for the
// step shape, and the KV bytes per token of its cache (KvCacheShape's default element type,
// what DraftModelProposer allocates).
DraftFootprint CpuDraftFootprint(const ModelConfig& draft, int64_t weights_bytes,
                                 int64_t max_num_batched_tokens, int64_t max_num_seqs);

// ComputeCpuKvPlan with a draft: both models' weights and activations come off the budget and
// the KV budget left (or --kv-cache-memory) is split between the two caches in proportion to
// their bytes per token, so num_blocks x (target + draft bytes per block) fits it. The plan's
// weights_bytes / activation_bytes include the draft; its KV fields are the target cache's
// (the draft's is num_blocks_allocated x block_size x draft.kv_bytes_per_token).
// --num-gpu-blocks-override fixes the block count of both caches.
StatusOr<MemoryPlan> ComputeCpuKvPlanWithDraft(const ModelConfig& config, int64_t weights_bytes,
                                               int64_t num_parameters, CpuKvOptions options,
                                               const DraftFootprint& draft);

// PlanCpuKvCache for a loaded model.
StatusOr<MemoryPlan> PlanCpuKvCache(const LoadedModel& model, const CpuKvOptions& options);

// The storage shape to allocate for a CPU plan: num_blocks = plan.num_blocks_allocated
// (usable blocks + the null block 0), dtype and skip layers from the plan's KV format, layer
// regions and groups from its KV cache groups.
KvCacheShape CpuKvCacheShape(const MemoryPlan& plan);

}  // namespace pagellm
