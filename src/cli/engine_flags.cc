#include "cli/engine_flags.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "fmt/format.h"
#include "model/pipeline_stage.h"
#include "spdlog/spdlog.h"
#include "spec/speculative_config_parser.h"

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

StatusOr<std::vector<int>> ParseLayerList(const std::string& text) {
  std::vector<int> layers;
  size_t pos = 0;
  while (!text.empty() && pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    char* end = nullptr;
    const long layer = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || layer < 0 || layer > 100000)
      return InvalidArgumentError(fmt::format(
          "--kv-cache-dtype-skip-layers: '{}' is not a layer index (expected e.g. 0,5)", item));
    layers.push_back(static_cast<int>(layer));
    pos = comma + 1;
  }
  return layers;
}

Status EngineFlags::Finalize() {
  if (!max_model_len.empty()) {
    ASSIGN_OR_RETURN(config.max_model_len, ParseTokenCount(max_model_len));
  }
  if (config.max_logprobs < -1) return InvalidArgumentError("--max-logprobs must be >= -1");
  // vLLM's rule: a context longer than the model's positions only on explicit request.
  const char* allow_long = std::getenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN");
  config.allow_long_max_model_len = allow_long != nullptr && (std::string(allow_long) == "1" ||
                                                              std::string(allow_long) == "true");
  if (!revision.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(config.model, ec))
      return InvalidArgumentError(fmt::format(
          "--revision {}: {} is not a local model; pagellm downloads nothing, so a revision "
          "can only name the local copy (download it with huggingface-cli --revision)",
          revision, config.model));
    spdlog::warn("--revision {} has no effect on this engine: the local model {} is used as it is",
                 revision, config.model);
  }
  ASSIGN_OR_RETURN(std::vector<std::string> notes, vllm.Check());
  config.tensor_parallel_size = vllm.tensor_parallel_size;
  config.pipeline_parallel_size = vllm.pipeline_parallel_size;
  config.tensor_parallel_group = TensorParallelWorld();
  if (config.pipeline_parallel_size > 1) {
    ASSIGN_OR_RETURN(config.pipeline_layer_partition, LayerPartitionFromEnvironment());
  }
  ASSIGN_OR_RETURN(config.float_matrix_dtype, ParseWeightDtype(vllm.dtype));
  config.quantization = vllm.quantization;
  for (const std::string& note : notes) spdlog::warn("{}", note);
  ASSIGN_OR_RETURN(config.scheduler.policy, ParseSchedulingPolicy(scheduling_policy));
  ASSIGN_OR_RETURN(config.scheduler.preemption_mode, ParsePreemptionMode(preemption_mode));
  if (!kv_cache_memory.empty() && !kv_cache_memory_bytes.empty())
    return InvalidArgumentError("give --kv-cache-memory or --kv-cache-memory-bytes, not both");
  if (!kv_cache_memory.empty()) {
    ASSIGN_OR_RETURN(int64_t bytes, ParseByteSize(kv_cache_memory));
    config.kv_cache_memory = bytes;
  }
  if (!kv_cache_memory_bytes.empty()) {
    ASSIGN_OR_RETURN(int64_t bytes, ParseHumanReadableInt(kv_cache_memory_bytes));
    if (bytes <= 0) return InvalidArgumentError("--kv-cache-memory-bytes must be positive");
    config.kv_cache_memory = bytes;
  }
  ASSIGN_OR_RETURN(config.kv_cache_dtype, ParseKvCacheDtype(kv_cache_dtype));
  ASSIGN_OR_RETURN(config.kv_cache_dtype_skip_layers, ParseLayerList(kv_cache_dtype_skip_layers));
  if (!(config.gpu_memory_utilization > 0 && config.gpu_memory_utilization <= 1))
    return InvalidArgumentError("--gpu-memory-utilization must be in (0, 1]");
  if (!speculative_config.empty())
    RETURN_IF_ERROR(MergeSpeculativeConfigJson(speculative_config, config.speculative));
  RETURN_IF_ERROR(ResolveSpeculativeConfig(config.speculative));
  return Status::Ok();
}

namespace {
Communicator* g_tensor_parallel_world = nullptr;
}  // namespace

void SetTensorParallelWorld(Communicator* world) {
  g_tensor_parallel_world = world;
}
Communicator* TensorParallelWorld() {
  return g_tensor_parallel_world;
}

void AddEngineFlags(CLI::App& app, EngineFlags& f, bool model_required,
                    const std::string& seed_flag) {
  EngineConfig& c = f.config;
  auto* m = app.add_option("--model", c.model, "HF model directory or .gguf file");
  if (model_required) m->required();
  app.add_option("--threads", c.threads, "CPU threads (default: all available)");
  app.add_option("--max-model-len", f.max_model_len,
                 "Context length per request (default: the model's); k/m/g = x1000, "
                 "K/M/G = x1024 (32k = 32000, 32K = 32768)");
  app.add_option("--max-logprobs", c.max_logprobs,
                 "Most logprobs or prompt_logprobs a request may ask for (-1: the vocabulary)")
      ->capture_default_str();
  AddVllmCompatFlags(app, f.vllm);
  app.add_option("--block-size", c.block_size, "KV cache block size in tokens (1..256)")
      ->capture_default_str();
  app.add_option("--gpu-memory-utilization", c.gpu_memory_utilization,
                 "Fraction of the memory available to the process (cgroup limits included) "
                 "for weights, activations and KV cache")
      ->capture_default_str();
  app.add_option("--kv-cache-memory", f.kv_cache_memory,
                 "KV cache size in bytes (e.g. 2GiB); overrides --gpu-memory-utilization");
  app.add_option("--kv-cache-memory-bytes", f.kv_cache_memory_bytes,
                 "vLLM's spelling of the KV cache size: bytes, with vLLM's suffixes k/m/g "
                 "(x1000) or K/M/G (x1024), e.g. 4G; overrides --gpu-memory-utilization");
  app.add_option("--tokenizer", c.tokenizer,
                 "Tokenizer directory (tokenizer.json / tokenizer.model and tokenizer_config.json; "
                 "default: the model's)");
  app.add_option("--revision", f.revision,
                 "vLLM's model revision: accepted for a local model (used as it is on disk); an "
                 "error for anything else, since nothing is downloaded");
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
  app.add_option("--max-num-partial-prefills", c.scheduler.max_num_partial_prefills,
                 "Most requests with an unfinished prompt that get prompt tokens in one step "
                 "(0 = no limit)")
      ->capture_default_str();
  app.add_option("--max-long-partial-prefills", c.scheduler.max_long_partial_prefills,
                 "Of those, most whose prompt is longer than --long-prefill-token-threshold "
                 "(0 = no limit)")
      ->capture_default_str();
  app.add_option("--scheduling-policy", f.scheduling_policy, "fcfs | priority")
      ->capture_default_str();
  app.add_option("--preemption-mode", f.preemption_mode, "recompute | swap")->capture_default_str();
  app.add_option("--kv-cache-dtype", f.kv_cache_dtype,
                 "KV cache element type: auto | float32 | bfloat16 | float16 | fp8 (= fp8_e4m3) | "
                 "fp8_e4m3 | fp8_e5m2 | int8 | int4. auto = the model's dtype: float32 for F32 "
                 "weights, bfloat16 for BF16, float16 for F16 and quantised GGUF weights "
                 "(llama.cpp's default f16 cache). int8/int4: asymmetric per-token, per-head "
                 "scale and zero point; int4 rows are Hadamard-rotated. Quantised formats store K "
                 "smoothed by a start-up calibration (per-channel offset, and range for int)")
      ->capture_default_str();
  app.add_flag("--calculate-kv-scales", c.calculate_kv_scales,
               "fp8_e4m3: per-layer K/V scales max|x| / 448 computed at start-up from a "
               "fixed built-in calibration text (vLLM: from the first batch) instead of 1.0; "
               "a checkpoint's own k_scale/v_scale tensors take precedence");
  app.add_option("--kv-cache-dtype-skip-layers", f.kv_cache_dtype_skip_layers,
                 "Comma-separated layer indices whose KV cache keeps the model dtype");
  app.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", c.enable_prefix_caching,
               "Reuse KV blocks of shared prompt prefixes (default on)");
  app.add_flag("--disable-hybrid-kv-cache-manager,!--no-disable-hybrid-kv-cache-manager",
               c.disable_hybrid_kv_cache_manager,
               "Keep every KV block of sliding-window layers (Gemma 2/3, Mistral) for the whole "
               "sequence instead of freeing the blocks their window no longer sees (default off)");
  app.add_option("--speculative-config", f.speculative_config,
                 "Speculative decoding as JSON: {\"method\": \"draft_model\"|\"ngram\", "
                 "\"model\": PATH, \"num_speculative_tokens\": K, \"max_model_len\": N, "
                 "\"prompt_lookup_min\": N, \"prompt_lookup_max\": N, \"draft_policy\": "
                 "\"adaptive\"|\"fixed\", \"draft_free_tokens\": F, \"ngram_rule\": "
                 "\"vote\"|\"earliest\"}. draft_policy adaptive (default; pagellm) drafts per "
                 "request by measured acceptance and skips drafting when a step of F (default 9) "
                 "or more tokens is compute-bound; fixed always drafts K (vLLM). ngram_rule vote "
                 "(default; pagellm) drafts token by token the most frequent follower of the "
                 "longest matching n-gram; earliest copies what followed its earliest occurrence "
                 "(vLLM)");
  app.add_option("--speculative-model", c.speculative.model,
                 "Draft model for speculative decoding (same tokenizer as --model)");
  app.add_option("--num-speculative-tokens", c.speculative.num_speculative_tokens,
                 "Draft tokens proposed per step (speculative decoding)");
  app.add_option("--speculative-max-model-len", c.speculative.max_model_len,
                 "Longest sequence the draft model runs on (default: its context)");
  app.add_option(seed_flag, c.seed, "Engine seed for requests without their own seed")
      ->capture_default_str();
}

}  // namespace pagellm::cli
