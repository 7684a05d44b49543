#include "engine/kv_cache_sizing.h"

#include <cmath>

#include "backend/cpu_backend.h"
#include "planner/cpu_plan.h"
#include "spdlog/spdlog.h"

namespace pagellm {

StatusOr<KvCacheReport> SizeKvCache(const LoadedModel& model, const EngineConfig& config) {
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
  o.activation_bytes = CpuBackend::ActivationBytes(mc, config.scheduler.max_num_batched_tokens,
                                                   config.scheduler.max_num_seqs);
  ASSIGN_OR_RETURN(MemoryPlan plan, PlanCpuKvCache(model, o));
  for (const std::string& line : PlanSummaryLines(plan)) spdlog::info("{}", line);
  KvCacheReport r;
  r.weights_bytes = plan.weights_bytes;
  r.activation_bytes = plan.activation_bytes;
  r.kv_bytes_per_token = plan.kv_bytes_per_token;
  r.num_blocks = static_cast<int32_t>(plan.num_blocks);
  r.num_tokens = plan.num_tokens;
  r.max_concurrency = plan.max_concurrency;
  r.max_model_len = config.max_model_len;
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
