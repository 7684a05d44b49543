#include "python/py_engine_config.h"

#include <algorithm>
#include <string>

#include "base/thread_pool.h"
#include "sched/scheduler_config.h"
#include "spec/speculative_config_parser.h"

namespace py = pybind11;

namespace pagellm::python {
namespace {

// Sets `out` from args[key] unless it is absent or None.
template <typename T>
void Get(const py::dict& args, const char* key, T& out) {
  if (!args.contains(key)) return;
  py::object v = args[key];
  if (v.is_none()) return;
  out = v.cast<T>();
}

void ThrowIfError(const Status& st) {
  if (!st.ok()) throw py::value_error(st.message());
}

}  // namespace

EngineConfig EngineConfigFromDict(const py::dict& args) {
  EngineConfig c;
  Get(args, "model", c.model);
  Get(args, "tokenizer", c.tokenizer);
  // vLLM's dtype: unquantized weight matrices converted at load (EngineConfig).
  std::string weight_dtype = "auto";
  Get(args, "dtype", weight_dtype);
  if (weight_dtype == "half" || weight_dtype == "float16") {
    c.float_matrix_dtype = DType::kF16;
  } else if (weight_dtype == "bfloat16") {
    c.float_matrix_dtype = DType::kBF16;
  } else if (weight_dtype == "float" || weight_dtype == "float32") {
    c.float_matrix_dtype = DType::kF32;
  } else if (weight_dtype != "auto") {
    throw py::value_error("dtype must be auto, half, float16, bfloat16, float or float32");
  }
  Get(args, "quantization", c.quantization);  // vLLM's name; must match the checkpoint
  Get(args, "threads", c.threads);
  // Tensor parallelism in one process (python/py_llm.h): `threads` is per rank, as the
  // binary's --threads; 0 shares the CPUs available to the process among the ranks.
  Get(args, "tensor_parallel_size", c.tensor_parallel_size);
  if (c.tensor_parallel_size < 1) throw py::value_error("tensor_parallel_size must be >= 1");
  if (c.tensor_parallel_size > 1 && c.threads == 0)
    c.threads = std::max(1, ThreadPool::AvailableCpus() / c.tensor_parallel_size);
  Get(args, "max_model_len", c.max_model_len);
  Get(args, "block_size", c.block_size);
  Get(args, "gpu_memory_utilization", c.gpu_memory_utilization);
  if (!(c.gpu_memory_utilization > 0 && c.gpu_memory_utilization <= 1))
    throw py::value_error("gpu_memory_utilization must be in (0, 1]");
  int64_t kv_bytes = 0;
  if (args.contains("kv_cache_memory_bytes") && !args["kv_cache_memory_bytes"].is_none()) {
    Get(args, "kv_cache_memory_bytes", kv_bytes);
    c.kv_cache_memory = kv_bytes;
  }
  int32_t blocks = 0;
  if (args.contains("num_gpu_blocks_override") && !args["num_gpu_blocks_override"].is_none()) {
    Get(args, "num_gpu_blocks_override", blocks);
    c.num_gpu_blocks_override = blocks;
  }
  Get(args, "swap_space", c.swap_space_gib);
  Get(args, "enable_prefix_caching", c.enable_prefix_caching);
  Get(args, "calculate_kv_scales", c.calculate_kv_scales);
  Get(args, "seed", c.seed);
  Get(args, "max_logprobs", c.max_logprobs);
  if (c.max_logprobs < -1) throw py::value_error("max_logprobs must be >= -1");
  std::string kv_dtype = "auto";
  Get(args, "kv_cache_dtype", kv_dtype);
  auto dtype = ParseKvCacheDtype(kv_dtype);
  ThrowIfError(dtype.status());
  c.kv_cache_dtype = *dtype;
  SchedulerConfig& s = c.scheduler;
  Get(args, "max_num_seqs", s.max_num_seqs);
  Get(args, "max_num_batched_tokens", s.max_num_batched_tokens);
  Get(args, "enable_chunked_prefill", s.enable_chunked_prefill);
  Get(args, "long_prefill_token_threshold", s.long_prefill_token_threshold);
  std::string policy = "fcfs";
  Get(args, "scheduling_policy", policy);
  auto parsed_policy = ParseSchedulingPolicy(policy);
  ThrowIfError(parsed_policy.status());
  s.policy = *parsed_policy;
  std::string preemption = "recompute";
  Get(args, "preemption_mode", preemption);
  auto parsed_preemption = ParsePreemptionMode(preemption);
  ThrowIfError(parsed_preemption.status());
  s.preemption_mode = *parsed_preemption;
  std::string spec_json;
  Get(args, "speculative_config", spec_json);
  if (!spec_json.empty()) ThrowIfError(MergeSpeculativeConfigJson(spec_json, c.speculative));
  ThrowIfError(ResolveSpeculativeConfig(c.speculative));
  return c;
}

}  // namespace pagellm::python
