// Engine settings, named and defaulted as vLLM's engine arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <vector>

#include "base/kv_cache_dtype.h"
#include "dist/communicator.h"
#include "pagellm/dtype.h"
#include "pagellm/sampling_params.h"
#include "pagellm/status.h"
#include "sched/scheduler_config.h"
#include "spec/speculative_config.h"

namespace pagellm {

struct EngineConfig {
  std::string model;
  // --tokenizer: a directory with the tokenizer files; empty = the model's own.
  std::string tokenizer;
  // --dtype: unquantized weight matrices converted to this type at load; nullopt ("auto"):
  // as stored (LoadOptions::float_matrix_dtype). A speculative draft model keeps its own.
  std::optional<DType> float_matrix_dtype;
  // --quantization (LoadOptions::quantization): empty = what the checkpoint says.
  std::string quantization;
  int threads = 0;  // 0 = all CPUs available to the process (per rank under tensor parallelism)
  // --tensor-parallel-size: ranks the model is split across (docs/PARALLELISM.md). Above 1 the
  // group must be given: this process is its rank 0 (the engine) and the other ranks run
  // RunTensorParallelWorker (backend/tensor_parallel_backend.h). Not owned.
  int tensor_parallel_size = 1;
  Communicator* tensor_parallel_group = nullptr;
  // --pipeline-parallel-size: stages the layers are split into (docs/PARALLELISM.md). Above 1
  // tensor_parallel_group is the world of tensor_parallel_size x pipeline_parallel_size ranks,
  // laid out stage-major (backend/rank_placement.h). pipeline_layer_partition: layers per stage
  // (PAGELLM_PP_LAYER_PARTITION); empty: vLLM's split.
  int pipeline_parallel_size = 1;
  std::vector<int> pipeline_layer_partition;
  // --max-model-len; 0 = the model's max_position_embeddings.
  int32_t max_model_len = 0;
  // A max_model_len beyond the model's max_position_embeddings is refused unless this is set
  // (the CLI sets it from vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; library callers opt out).
  bool allow_long_max_model_len = true;
  int32_t block_size = 16;
  // Fraction of the memory available to the process (cgroup limits included) that weights,
  // activations and KV cache may use.
  double gpu_memory_utilization = 0.9;
  std::optional<int64_t> kv_cache_memory;          // bytes; overrides the fraction
  std::optional<int32_t> num_gpu_blocks_override;  // usable blocks; overrides everything
  double swap_space_gib = 4.0;                     // secondary (host) pool for swap preemption
  bool enable_prefix_caching = true;
  // --disable-hybrid-kv-cache-manager: keep every KV block of sliding-window layers for the
  // whole sequence (one full block table per request) instead of one table per KV cache group
  // that frees what the window no longer sees (kv/kv_cache_groups.h). Outputs are identical.
  bool disable_hybrid_kv_cache_manager = false;
  // --kv-cache-dtype (auto = the model's dtype: float32 for F32 weights, bfloat16 for BF16,
  // float16 for F16 and quantised GGUF weights, as llama.cpp's default f16 cache).
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  bool calculate_kv_scales = false;             // fp8_e4m3 scales from the calibration text
  std::vector<int> kv_cache_dtype_skip_layers;  // layers kept at the model dtype
  uint64_t seed = 0;                            // source of seeds for requests without their own
  // --max-logprobs: most logprobs / prompt_logprobs a request may ask for (-1: vocabulary).
  int max_logprobs = SamplingParams::kDefaultMaxLogprobs;
  // Scheduler (--max-num-seqs, --max-num-batched-tokens, chunked prefill, policies, ...).
  // max_model_len there is filled in from the resolved value above.
  SchedulerConfig scheduler;
  SpeculativeConfig speculative;
};

}  // namespace pagellm
