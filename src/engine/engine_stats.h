// Snapshots of the engine's state for metrics and logs (EngineStats) and how its KV cache was
// sized at start-up (KvCacheReport); readable without the engine core.
#pragma once

#include <cstdint>
#include <vector>

#include "base/kv_cache_dtype.h"
#include "spec/spec_decode_stats.h"

namespace pagellm {

// How the KV cache was sized at start-up (logged, and checked against `pagellm plan`).
struct KvCacheReport {
  int64_t weights_bytes = 0;
  // Under tensor and pipeline parallelism the largest rank's (the plan is per device); else
  // weights_bytes.
  int64_t weights_bytes_per_device = 0;
  int64_t activation_bytes = 0;
  int64_t kv_bytes_per_token = 0;
  KvElementFormat kv_format;    // resolved --kv-cache-dtype (storage_dtype: what is stored)
  int32_t num_blocks = 0;       // usable blocks (excluding the null block)
  int64_t num_tokens = 0;       // num_blocks * block_size
  double max_concurrency = 0;   // num_tokens / max_model_len
  int32_t num_swap_blocks = 0;  // secondary pool
  // Window of each KV cache group (kv/kv_cache_groups.h) when sliding-window layers free
  // their blocks; empty: one full-attention group (blocks hold every layer).
  std::vector<int32_t> kv_group_windows;
  int32_t max_model_len = 0;
  // Speculative decoding with a draft model: its weights and KV bytes per token (its KV cache
  // has as many blocks as the target's, so the blocks above come from the shared budget).
  int64_t draft_weights_bytes = 0;
  int64_t draft_kv_bytes_per_token = 0;
};

struct EngineStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_swapped = 0;
  int64_t num_preemptions = 0;
  double kv_usage = 0;  // 1 - free / total, as vLLM
  double swap_usage = 0;
  int64_t prefix_cache_queries = 0;  // tokens
  int64_t prefix_cache_hits = 0;     // tokens
  int64_t num_steps = 0;
  int32_t num_free_blocks = 0;
  int32_t num_usable_blocks = 0;
  // KV waste: slots of blocks held by requests vs slots holding a computed token.
  int64_t kv_slots_allocated = 0;
  int64_t kv_slots_used = 0;
  // Speculative decoding (cumulative); num_speculative_tokens = 0 when it is off.
  int32_t num_speculative_tokens = 0;
  SpecDecodeStats spec_decode;
  // Structured outputs (cumulative): token masks built and the time spent building them, and
  // the grammar compile cache (hits, misses = compilations, their total time).
  int64_t grammar_masks = 0;
  double grammar_mask_seconds = 0.0;
  int64_t grammar_cache_hits = 0;
  int64_t grammar_cache_misses = 0;
  double grammar_compile_seconds = 0.0;
  // Tensor parallelism (cumulative over forward steps; all zero on one rank): rank 0's wall
  // time in Backend::Forward and, of it, inside the group's collectives (ForwardOutput's
  // comm_seconds, all_reduce_seconds, num_all_reduces).
  int32_t tensor_parallel_size = 1;
  int64_t tp_forward_steps = 0;
  double tp_forward_seconds = 0.0;
  double tp_comm_seconds = 0.0;
  double tp_all_reduce_seconds = 0.0;
  int64_t tp_all_reduces = 0;
};

}  // namespace pagellm
