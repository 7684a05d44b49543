#include "cli/engine_flags.h"

#include <cmath>
#include <cstdlib>

#include "fmt/format.h"

namespace pagellm::cli {

StatusOr<int64_t> ParseByteSize(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(v >= 0) || !std::isfinite(v))
    return InvalidArgumentError(fmt::format("bad byte size '{}'", text));
  const std::string unit(end);
  double mult = 1;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "KiB" || unit == "K")
    mult = 1024.0;
  else if (unit == "MiB" || unit == "M")
    mult = 1024.0 * 1024;
  else if (unit == "GiB" || unit == "G")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "KB")
    mult = 1e3;
  else if (unit == "MB")
    mult = 1e6;
  else if (unit == "GB")
    mult = 1e9;
  else
    return InvalidArgumentError(fmt::format("bad byte size unit in '{}'", text));
  return static_cast<int64_t>(v * mult);
}

Status EngineFlags::Finalize() {
  ASSIGN_OR_RETURN(config.scheduler.policy, ParseSchedulingPolicy(scheduling_policy));
  ASSIGN_OR_RETURN(config.scheduler.preemption_mode, ParsePreemptionMode(preemption_mode));
  if (!kv_cache_memory.empty()) {
    ASSIGN_OR_RETURN(int64_t bytes, ParseByteSize(kv_cache_memory));
    config.kv_cache_memory = bytes;
  }
  if (!(config.gpu_memory_utilization > 0 && config.gpu_memory_utilization <= 1))
    return InvalidArgumentError("--gpu-memory-utilization must be in (0, 1]");
  return Status::Ok();
}

void AddEngineFlags(CLI::App& app, EngineFlags& f, bool model_required,
                    const std::string& seed_flag) {
  EngineConfig& c = f.config;
  auto* m = app.add_option("--model", c.model, "HF model directory or .gguf file");
  if (model_required) m->required();
  app.add_option("--threads", c.threads, "CPU threads (default: all available)");
  app.add_option("--max-model-len", c.max_model_len,
                 "Context length per request (default: the model's)");
  app.add_option("--block-size", c.block_size, "KV cache block size in tokens (1..256)")
      ->capture_default_str();
  app.add_option("--gpu-memory-utilization", c.gpu_memory_utilization,
                 "Fraction of the memory available to the process (cgroup limits included) "
                 "for weights, activations and KV cache")
      ->capture_default_str();
  app.add_option("--kv-cache-memory", f.kv_cache_memory,
                 "KV cache size in bytes (e.g. 2GiB); overrides --gpu-memory-utilization");
  app.add_option("--num-gpu-blocks-override", c.num_gpu_blocks_override,
                 "Exact number of KV blocks (overrides memory sizing)");
  app.add_option("--swap-space", c.swap_space_gib,
                 "GiB of host memory for swapped-out KV blocks (--preemption-mode swap)")
      ->capture_default_str();
  app.add_option("--max-num-seqs", c.scheduler.max_num_seqs, "Most requests running at once")
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", c.scheduler.max_num_batched_tokens,
                 "Token budget of one engine step")
      ->capture_default_str();
  app.add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill",
               c.scheduler.enable_chunked_prefill, "Split long prompts across steps (default on)");
  app.add_option("--long-prefill-token-threshold", c.scheduler.long_prefill_token_threshold,
                 "Most tokens one request may take in a step (0 = no cap)");
  app.add_option("--scheduling-policy", f.scheduling_policy, "fcfs | priority")
      ->capture_default_str();
  app.add_option("--preemption-mode", f.preemption_mode, "recompute | swap")->capture_default_str();
  app.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", c.enable_prefix_caching,
               "Reuse KV blocks of shared prompt prefixes (default on)");
  app.add_option(seed_flag, c.seed, "Engine seed for requests without their own seed")
      ->capture_default_str();
}

}  // namespace pagellm::cli
