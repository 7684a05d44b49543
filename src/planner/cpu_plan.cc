#include "planner/cpu_plan.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "backend/backend_factory.h"
#include "planner/host_memory.h"

namespace pagellm {

int64_t CpuActivationBytes(const ModelConfig& config, int64_t max_num_batched_tokens,
                           int64_t max_num_seqs) {
  return BackendActivationBytes(BackendKind::kCpu, config, max_num_batched_tokens, max_num_seqs);
}

StatusOr<MemoryPlan> ComputeCpuKvPlan(const ModelConfig& config, int64_t weights_bytes,
                                      int64_t num_parameters, const CpuKvOptions& o) {
  if (o.max_num_batched_tokens < 1) {
    return InvalidArgumentError(
        fmt::format("--max-num-batched-tokens {} must be >= 1", o.max_num_batched_tokens));
  }
  if (o.max_num_seqs < 1) {
    return InvalidArgumentError(fmt::format("--max-num-seqs {} must be >= 1", o.max_num_seqs));
  }
  ASSIGN_OR_RETURN(KvElementFormat format,
                   ResolveKvCacheFormat(o.kv_cache_dtype, config.weight_dtype,
                                        o.kv_cache_dtype_skip_layers, config.num_layers));
  if (format.storage_dtype == KvCacheDtype::kInt4 && config.head_dim % 2 != 0) {
    return InvalidArgumentError(
        fmt::format("--kv-cache-dtype int4 needs an even head_dim, got {}", config.head_dim));
  }

  PlanInput in;
  const KvCacheGroups groups = CpuKvCacheGroups(config, format, o.free_kv_outside_windows);
  if (!groups.is_single_full()) {
    in.kv_group_windows = groups.windows();
    in.kv_layers_per_group = groups.layers_per_group;
  }
  in.model = config;
  in.tensor_parallel_size = o.tensor_parallel_size;
  in.pipeline_parallel_size = o.pipeline_parallel_size;
  in.layer_partition = o.layer_partition;
  // The ranks share the host evenly.
  const int64_t ranks = std::max(1, o.tensor_parallel_size * o.pipeline_parallel_size);
  const int64_t host = o.host_memory_bytes > 0 ? o.host_memory_bytes
                                               : static_cast<int64_t>(AvailableHostMemoryBytes());
  in.device_name = ranks > 1 ? fmt::format("CPU (1/{} of the host)", ranks) : "CPU";
  in.device_memory_bytes = host / ranks;
  in.gpu_memory_utilization = o.gpu_memory_utilization;
  in.weights = WeightsFromTotal(weights_bytes, num_parameters, 1);
  if (o.weights_bytes_per_device) in.weights.bytes_per_device = *o.weights_bytes_per_device;
  in.activation_bytes = o.activation_bytes >= 0
                            ? o.activation_bytes
                            : CpuActivationBytes(config, o.max_num_batched_tokens, o.max_num_seqs);
  in.kv_format = format;
  in.block_size = o.block_size;
  in.max_model_len = o.max_model_len > 0 ? o.max_model_len : config.max_position_embeddings;
  in.kv_cache_memory_bytes = o.kv_cache_memory;
  in.num_gpu_blocks_override = o.num_gpu_blocks_override;
  if (o.host_free_bytes) {
    in.free_memory_bytes = *o.host_free_bytes / ranks;
  } else if (o.host_memory_bytes <= 0) {
    const uint64_t free = FreeHostMemoryBytes();
    if (free > 0) in.free_memory_bytes = static_cast<int64_t>(free) / ranks;
  }
  in.free_memory_headroom_bytes = std::max<int64_t>(int64_t{1} << 30, host / 10) / ranks;
  return ComputeMemoryPlan(in);
}

StatusOr<MemoryPlan> PlanCpuKvCache(const ModelConfig& config, int64_t weights_bytes,
                                    const CpuKvOptions& options) {
  // The parameter count only labels reports; the engine's plan does not need it.
  ASSIGN_OR_RETURN(MemoryPlan plan, ComputeCpuKvPlan(config, weights_bytes, 0, options));
  RETURN_IF_ERROR(CheckPlanFits(plan));
  return plan;
}

StatusOr<MemoryPlan> PlanCpuKvCache(const LoadedModel& model, const CpuKvOptions& options) {
  ASSIGN_OR_RETURN(MemoryPlan plan, ComputeCpuKvPlan(model.config, model.weights.total_bytes,
                                                     model.weights.num_parameters, options));
  RETURN_IF_ERROR(CheckPlanFits(plan));
  return plan;
}

DraftFootprint CpuDraftFootprint(const ModelConfig& draft, int64_t weights_bytes,
                                 int64_t max_num_batched_tokens, int64_t max_num_seqs) {
  DraftFootprint f;
  f.weights_bytes = weights_bytes;
  f.activation_bytes = CpuActivationBytes(draft, max_num_batched_tokens, max_num_seqs);
  KvCacheShape shape;
  shape.num_layers = draft.num_layers;
  shape.num_kv_heads = draft.num_kv_heads;
  shape.head_dim = draft.head_dim;
  f.kv_bytes_per_token = shape.bytes_per_token();
  return f;
}

StatusOr<MemoryPlan> ComputeCpuKvPlanWithDraft(const ModelConfig& config, int64_t weights_bytes,
                                               int64_t num_parameters, CpuKvOptions o,
                                               const DraftFootprint& draft) {
  if (o.activation_bytes < 0)
    o.activation_bytes = CpuActivationBytes(config, o.max_num_batched_tokens, o.max_num_seqs);
  o.activation_bytes += draft.activation_bytes;
  // The draft reads and writes through the target's block tables: one full table each.
  o.free_kv_outside_windows = false;
  const int64_t weights = weights_bytes + draft.weights_bytes;
  // Split across ranks, the draft runs on rank 0, whose budget sets every rank's blocks.
  if (o.weights_bytes_per_device) *o.weights_bytes_per_device += draft.weights_bytes;
  if (!o.num_gpu_blocks_override && draft.kv_bytes_per_token > 0) {
    // The budget left after both models' weights and activations, shared by the two caches in
    // proportion to their bytes per token.
    ASSIGN_OR_RETURN(MemoryPlan whole, ComputeCpuKvPlan(config, weights, num_parameters, o));
    const double target_kv = static_cast<double>(whole.kv_bytes_per_token);
    const double share = target_kv / (target_kv + static_cast<double>(draft.kv_bytes_per_token));
    o.kv_cache_memory = static_cast<int64_t>(
        std::floor(static_cast<double>(std::max<int64_t>(whole.kv_cache_budget_bytes, 0)) * share));
  }
  return ComputeCpuKvPlan(config, weights, num_parameters, o);
}

KvCacheShape CpuKvCacheShape(const MemoryPlan& plan) {
  KvCacheShape shape;
  shape.num_layers = plan.input.model.num_layers;
  shape.num_kv_heads = plan.input.model.num_kv_heads;
  shape.head_dim = plan.input.model.head_dim;
  shape.block_size = plan.input.block_size;
  shape.num_blocks = static_cast<int>(plan.num_blocks_allocated);
  const KvElementFormat& f = plan.input.kv_format;
  if (f.storage_dtype != KvCacheDtype::kAuto) shape.dtype = f.storage_dtype;
  shape.skip_layers = f.skip_layers;
  if (f.skip_dtype != KvCacheDtype::kAuto) shape.skip_dtype = f.skip_dtype;
  if (!plan.input.kv_group_windows.empty()) {
    const KvCacheGroups groups = CpuKvCacheGroups(plan.input.model, f, true);
    shape.layer_region = groups.layer_region;
    shape.layer_group = groups.layer_group;
  }
  return shape;
}

KvCacheGroups CpuKvCacheGroups(const ModelConfig& config, const KvElementFormat& format,
                               bool allow_windows) {
  std::vector<int> windows(config.num_layers);
  for (int l = 0; l < config.num_layers; ++l) windows[l] = config.LayerWindow(l);
  const bool windowed = std::any_of(windows.begin(), windows.end(), [](int w) { return w > 0; });
  if (!allow_windows || !windowed || !format.skip_layers.empty())
    return SingleFullKvCacheGroup(config.num_layers);
  return MakeKvCacheGroups(windows);
}

}  // namespace pagellm
