#include "engine/kv_cache_sizing.h"

#include <algorithm>
#include <cmath>

#include "backend/backend_factory.h"
#include "backend/rank_placement.h"
#include "planner/byte_size.h"
#include "planner/cpu_plan.h"
#include "spdlog/spdlog.h"

namespace pagellm {

StatusOr<KvCacheReport> SizeKvCache(const LoadedModel& model, const EngineConfig& config,
                                    const DraftModelProposer* draft) {
  const ModelConfig& mc = model.config;
  CpuKvOptions o;
  o.gpu_memory_utilization = config.gpu_memory_utilization;
  o.kv_cache_memory = config.kv_cache_memory;
  if (config.num_gpu_blocks_override.has_value())
    o.num_gpu_blocks_override = *config.num_gpu_blocks_override;
  o.block_size = config.block_size;
  o.max_model_len = config.max_model_len;
  o.max_num_batched_tokens = config.scheduler.max_num_batched_tokens;
  o.max_num_seqs = config.scheduler.max_num_seqs;
  o.kv_cache_dtype = config.kv_cache_dtype;
  o.kv_cache_dtype_skip_layers = config.kv_cache_dtype_skip_layers;
  // Tensor- and pipeline-parallel ranks and a draft model take one full block table per
  // request.
  const int tp = config.tensor_parallel_size, pp = config.pipeline_parallel_size;
  o.free_kv_outside_windows =
      tp <= 1 && pp <= 1 && draft == nullptr && !config.disable_hybrid_kv_cache_manager;
  if (tp * pp > 1) {
    // Per device (rank): the largest rank's weights; a block is a rank's heads of its stage.
    o.tensor_parallel_size = tp;
    o.pipeline_parallel_size = pp;
    o.layer_partition = config.pipeline_layer_partition;
    ASSIGN_OR_RETURN(o.weights_bytes_per_device,
                     LargestRankWeightBytes(model, tp, pp, o.layer_partition));
  }
  o.activation_bytes =
      BackendActivationBytes(BackendKind::kCpu, mc, config.scheduler.max_num_batched_tokens,
                             config.scheduler.max_num_seqs);
  MemoryPlan plan;
  if (draft != nullptr) {
    // The draft's weights, activations and KV (same block count) share the budget; the split
    // is the planner's, so `pagellm plan --speculative-model` prints the same numbers.
    DraftFootprint d;
    d.weights_bytes = draft->weights_bytes();
    d.activation_bytes = BackendActivationBytes(BackendKind::kCpu, draft->model().config,
                                                config.scheduler.max_num_batched_tokens,
                                                config.scheduler.max_num_seqs);
    d.kv_bytes_per_token = draft->kv_bytes_per_token();
    ASSIGN_OR_RETURN(plan, ComputeCpuKvPlanWithDraft(mc, model.weights.total_bytes, 0, o, d));
    RETURN_IF_ERROR(CheckPlanFits(plan));
  } else {
    ASSIGN_OR_RETURN(plan, PlanCpuKvCache(mc, model.weights.total_bytes, o));
  }
  for (const std::string& line : PlanSummaryLines(plan)) spdlog::info("{}", line);
  // The storage is one lazily committed mapping (kv/kv_cache_storage.h): say what the cache can
  // add to RSS at most, so that an operator can tell its growth from a leak (docs/SERVER.md,
  // "Memory").
  spdlog::info(
      "KV cache memory: at most {} ({} bytes) becomes resident, page by page as blocks are first "
      "written; blocks never used are never touched",
      FormatBytes(plan.kv_cache_bytes_allocated), plan.kv_cache_bytes_allocated);
  KvCacheReport r;
  r.weights_bytes = plan.weights_bytes;
  r.weights_bytes_per_device = plan.weights_bytes_per_device;
  r.activation_bytes = plan.activation_bytes;
  r.kv_bytes_per_token = plan.kv_bytes_per_token;
  r.kv_format = plan.input.kv_format;
  if (r.kv_format.storage_dtype != AutoKvCacheDtype(mc.weight_dtype)) {
    // Say what the chosen dtype buys against the model-dtype cache at the same budget.
    KvElementFormat model_format = r.kv_format;
    model_format.bits_per_element = r.kv_format.skip_bits_per_element;
    model_format.scale_bytes_per_head_per_token = 0;
    const double model_bytes = static_cast<double>(
        KvBytesPerToken(model_format, mc.num_layers, mc.num_kv_heads, mc.head_dim));
    spdlog::info("KV cache dtype {}: {:.2f}x the blocks of a {} cache at this budget",
                 KvCacheDtypeName(r.kv_format.storage_dtype),
                 model_bytes / static_cast<double>(plan.kv_bytes_per_token),
                 KvCacheDtypeName(r.kv_format.skip_dtype));
  }
  r.kv_group_windows = plan.input.kv_group_windows;
  if (!r.kv_group_windows.empty()) {
    spdlog::info(
        "KV cache groups: {} of {} layers ({} full attention); window groups free the blocks "
        "their window no longer sees, {} blocks per request of {} tokens",
        r.kv_group_windows.size(), plan.input.kv_layers_per_group,
        std::count(r.kv_group_windows.begin(), r.kv_group_windows.end(), 0),
        plan.blocks_per_request, config.max_model_len);
  }
  r.num_blocks = static_cast<int32_t>(plan.num_blocks);
  r.num_tokens = plan.num_tokens;
  r.max_concurrency = plan.max_concurrency;
  r.max_model_len = config.max_model_len;
  if (draft != nullptr) {
    r.draft_weights_bytes = draft->weights_bytes();
    r.draft_kv_bytes_per_token = draft->kv_bytes_per_token();
    spdlog::info(
        "speculative draft '{}': weights {:.1f} MiB, KV {} bytes/token (target {}); {} blocks "
        "shared by both caches, {:.1f} MiB of draft KV",
        draft->model().path, r.draft_weights_bytes / 1048576.0, r.draft_kv_bytes_per_token,
        r.kv_bytes_per_token, r.num_blocks,
        static_cast<double>(r.draft_kv_bytes_per_token) * config.block_size * (r.num_blocks + 1) /
            1048576.0);
  }
  if (config.scheduler.preemption_mode == PreemptionMode::kSwap) {
    const double bytes = config.swap_space_gib * 1024.0 * 1024.0 * 1024.0;
    r.num_swap_blocks = static_cast<int32_t>(std::floor(bytes / plan.kv_bytes_per_block));
    if (r.num_swap_blocks < 2) r.num_swap_blocks = 0;  // too small to be a pool
    spdlog::info("swap space: {} blocks ({:.1f} MiB)", r.num_swap_blocks,
                 r.num_swap_blocks * static_cast<double>(plan.kv_bytes_per_block) / 1048576.0);
  }
  return r;
}

}  // namespace pagellm
