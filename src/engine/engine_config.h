// Engine settings, named and defaulted as vLLM's engine arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pagellm/status.h"
#include "sched/scheduler_config.h"

namespace pagellm {

struct EngineConfig {
  std::string model;
  int threads = 0;  // 0 = all CPUs available to the process
  // --max-model-len; 0 = the model's max_position_embeddings.
  int32_t max_model_len = 0;
  int32_t block_size = 16;
  // Fraction of the memory available to the process (cgroup limits included) that weights,
  // activations and KV cache may use.
  double gpu_memory_utilization = 0.9;
  std::optional<int64_t> kv_cache_memory;          // bytes; overrides the fraction
  std::optional<int32_t> num_gpu_blocks_override;  // usable blocks; overrides everything
  double swap_space_gib = 4.0;                     // secondary (host) pool for swap preemption
  bool enable_prefix_caching = true;
  uint64_t seed = 0;  // source of seeds for requests without their own
  // Scheduler (--max-num-seqs, --max-num-batched-tokens, chunked prefill, policies, ...).
  // max_model_len there is filled in from the resolved value above.
  SchedulerConfig scheduler;
};

}  // namespace pagellm
