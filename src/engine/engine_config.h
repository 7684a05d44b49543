// Engine settings, named and defaulted as vLLM's engine arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <vector>

#include "pagellm/status.h"
#include "planner/kv_cache_dtype.h"
#include "sched/scheduler_config.h"

namespace pagellm {

// Speculative decoding (vLLM's --speculative-config). method "" = off.
struct SpeculativeConfig {
  std::string method;  // "" | "draft_model" | "ngram"
  std::string model;   // draft model path (draft_model)
  int32_t num_speculative_tokens = 0;  // k: drafts proposed per step and request
  // Longest sequence the draft runs on (--speculative-max-model-len / "max_model_len"); past it
  // a request decodes without drafts. 0 = min(target max_model_len, the draft's context).
  int32_t max_model_len = 0;
  // n-gram matching: the longest and shortest suffix n-gram looked up in the sequence.
  int32_t prompt_lookup_min = 0;
  int32_t prompt_lookup_max = 0;
  // pagellm extensions (see src/spec/adaptive_draft_policy.h): "adaptive" (default) drafts per
  // request by measured acceptance and step cost, "fixed" always drafts k (vLLM).
  std::string draft_policy = "adaptive";
  // Step tokens below which a step counts as weight-bound (the adaptive policy's cost knee).
  double draft_free_tokens = 9;
  // n-gram drafting rule (src/spec/ngram_proposer.h): "vote" (default, pagellm) or
  // "earliest" (vLLM's prompt lookup).
  std::string ngram_rule = "vote";

  bool enabled() const { return !method.empty() && num_speculative_tokens > 0; }
};

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
  // --kv-cache-dtype (auto = the model's dtype: float32 for F32 weights, bfloat16 for BF16,
  // float16 for F16 and quantised GGUF weights, as llama.cpp's default f16 cache).
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  bool calculate_kv_scales = false;            // fp8_e4m3 scales from the calibration text
  std::vector<int> kv_cache_dtype_skip_layers;  // layers kept at the model dtype
  uint64_t seed = 0;  // source of seeds for requests without their own
  // Scheduler (--max-num-seqs, --max-num-batched-tokens, chunked prefill, policies, ...).
  // max_model_len there is filled in from the resolved value above.
  SchedulerConfig scheduler;
  SpeculativeConfig speculative;
};

}  // namespace pagellm
