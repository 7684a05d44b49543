#include "cli/vllm_inert_flags.h"

#include "fmt/format.h"
#include "fmt/ranges.h"

namespace pagellm::cli {
namespace {

enum class Arity {
  kSwitch,    // store_true: --x
  kBool,      // argparse's BooleanOptionalAction: --x / --no-x
  kValue,     // --x VALUE
  kValues,    // --x V1 [V2 ...] (argparse nargs="+")
  kOptional,  // --x [VALUE] (argparse nargs="?")
};

struct InertFlag {
  const char* name;   // "--x"
  const char* alias;  // a short spelling ("-O") or nullptr
  Arity arity;
  // nullptr: accepted with a note whatever the value. Otherwise the one value this engine can
  // honour (a note), every other value failing start-up as not supported ("" = never).
  const char* honoured;
  const char* why;
};

// vLLM's `vllm serve` flags (EngineArgs and the OpenAI frontend's) that mean nothing here.
constexpr InertFlag kFlags[] = {
    // Model.
    {"--hf-config-path", nullptr, Arity::kValue, nullptr,
     "config.json is read from the model directory"},
    {"--allowed-local-media-path", nullptr, Arity::kValue, nullptr,
     "no multimodal inputs are read"},
    {"--allowed-media-domains", nullptr, Arity::kValues, nullptr, "no multimodal inputs are read"},
    {"--code-revision", nullptr, Arity::kValue, nullptr, "no model code is ever run"},
    {"--tokenizer-revision", nullptr, Arity::kValue, nullptr,
     "the tokenizer directory is used as it is on disk"},
    {"--tokenizer-mode", nullptr, Arity::kValue, nullptr,
     "one native tokenizer reads tokenizer.json / tokenizer.model / GGUF vocabularies"},
    {"--rope-scaling", nullptr, Arity::kValue, nullptr,
     "RoPE scaling is read from the model's config.json"},
    {"--rope-theta", nullptr, Arity::kValue, nullptr,
     "rope_theta is read from the model's config.json"},
    {"--logprobs-mode", nullptr, Arity::kValue, "raw_logprobs",
     "logprobs are the raw model's (vLLM's default raw_logprobs)"},
    {"--disable-sliding-window", nullptr, Arity::kSwitch, nullptr,
     "sliding windows always apply as the model config says (Mistral, Gemma 2 / 3)"},
    {"--disable-cascade-attn", nullptr, Arity::kSwitch, nullptr,
     "the CPU attention kernel has no cascade variant"},
    {"--skip-tokenizer-init", nullptr, Arity::kSwitch, "",
     "responses are always detokenized (a tokenizer is required)"},
    {"--enable-prompt-embeds", nullptr, Arity::kSwitch, "",
     "prompts are text or token ids; embeddings as input are not accepted"},
    {"--config-format", nullptr, Arity::kValue, nullptr,
     "config.json (Hugging Face) or GGUF metadata is read"},
    {"--hf-token", nullptr, Arity::kOptional, nullptr, "nothing is downloaded"},
    {"--hf-overrides", nullptr, Arity::kValue, "{}", "the model's config.json is used unchanged"},
    {"--logits-processor-pattern", nullptr, Arity::kValue, "",
     "custom logits processors are not loaded"},
    {"--logits-processors", nullptr, Arity::kValues, "", "custom logits processors are not loaded"},
    {"--enable-sleep-mode", nullptr, Arity::kSwitch, nullptr, "there is no GPU memory to release"},
    {"--model-impl", nullptr, Arity::kValue, nullptr,
     "every architecture has one native implementation"},
    {"--override-attention-dtype", nullptr, Arity::kValue, nullptr,
     "attention computes in float32"},
    {"--io-processor-plugin", nullptr, Arity::kValue, "", "plugins are not loaded"},
    // Loading.
    {"--load-format", nullptr, Arity::kValue, nullptr,
     "the format is read from the files (safetensors or GGUF)"},
    {"--safetensors-load-strategy", nullptr, Arity::kValue, nullptr,
     "safetensors files are memory-mapped"},
    {"--model-loader-extra-config", nullptr, Arity::kValue, nullptr, "there is one model loader"},
    {"--ignore-patterns", nullptr, Arity::kValues, nullptr,
     "only the weight files named by the model directory are read"},
    {"--use-tqdm-on-load", nullptr, Arity::kBool, nullptr, "loading is memory-mapped and quick"},
    {"--pt-load-map-location", nullptr, Arity::kValue, nullptr, "PyTorch checkpoints are not read"},
    // Structured outputs and reasoning.
    {"--reasoning-parser-plugin", nullptr, Arity::kValue, nullptr,
     "plugins are not loaded; --reasoning-parser deepseek_r1 | qwen3 are built in"},
    {"--guided-decoding-backend", nullptr, Arity::kValue, nullptr,
     "structured output always runs on the built-in grammar engine (docs/STRUCTURED_OUTPUTS.md)"},
    {"--guided-decoding-disable-fallback", nullptr, Arity::kValue, nullptr,
     "there is one grammar engine and no fallback: a constraint it cannot compile gets 400"},
    {"--guided-decoding-disable-any-whitespace", nullptr, Arity::kValue, nullptr,
     "not applied: JSON grammars allow whitespace between tokens; a request's whitespace_pattern "
     "narrows it"},
    {"--guided-decoding-disable-additional-properties", nullptr, Arity::kValue, nullptr,
     "already so: an object schema with properties admits no other keys unless its "
     "additionalProperties allows them"},
    {"--structured-outputs-config", nullptr, Arity::kValue, nullptr,
     "the grammar engine has no server-wide options (a request's whitespace_pattern is honoured)"},
    // Parallelism.
    {"--distributed-executor-backend", nullptr, Arity::kValue, nullptr,
     "one process runs the whole model"},
    {"--decode-context-parallel-size", nullptr, Arity::kValue, "1",
     "one process runs the whole model"},
    {"--data-parallel-size", nullptr, Arity::kValue, "1", "one engine per process"},
    {"--data-parallel-rank", nullptr, Arity::kValue, "0", "one engine per process"},
    {"--data-parallel-start-rank", nullptr, Arity::kValue, "0", "one engine per process"},
    {"--data-parallel-size-local", nullptr, Arity::kValue, "1", "one engine per process"},
    {"--data-parallel-address", nullptr, Arity::kValue, nullptr, "one engine per process"},
    {"--data-parallel-rpc-port", nullptr, Arity::kValue, nullptr, "one engine per process"},
    {"--data-parallel-backend", nullptr, Arity::kValue, nullptr, "one engine per process"},
    {"--data-parallel-hybrid-lb", nullptr, Arity::kBool, nullptr, "one engine per process"},
    {"--data-parallel-external-lb", nullptr, Arity::kBool, nullptr, "one engine per process"},
    {"--enable-expert-parallel", nullptr, Arity::kBool, nullptr,
     "experts (if any) run in this one process"},
    {"--all2all-backend", nullptr, Arity::kValue, nullptr, "there is no expert parallelism"},
    {"--enable-dbo", nullptr, Arity::kBool, nullptr, "there is no expert parallelism"},
    {"--dbo-decode-token-threshold", nullptr, Arity::kValue, nullptr,
     "there is no expert parallelism"},
    {"--dbo-prefill-token-threshold", nullptr, Arity::kValue, nullptr,
     "there is no expert parallelism"},
    {"--disable-nccl-for-dp-synchronization", nullptr, Arity::kBool, nullptr, "there is no NCCL"},
    {"--enable-eplb", nullptr, Arity::kBool, nullptr, "there is no expert parallelism"},
    {"--eplb-config", nullptr, Arity::kValue, nullptr, "there is no expert parallelism"},
    {"--expert-placement-strategy", nullptr, Arity::kValue, nullptr,
     "there is no expert parallelism"},
    {"--num-redundant-experts", nullptr, Arity::kValue, nullptr, "there is no expert parallelism"},
    {"--eplb-window-size", nullptr, Arity::kValue, nullptr, "there is no expert parallelism"},
    {"--eplb-step-interval", nullptr, Arity::kValue, nullptr, "there is no expert parallelism"},
    {"--eplb-log-balancedness", nullptr, Arity::kBool, nullptr, "there is no expert parallelism"},
    {"--max-parallel-loading-workers", nullptr, Arity::kValue, nullptr,
     "weights are memory-mapped, not loaded by workers"},
    {"--ray-workers-use-nsight", nullptr, Arity::kBool, nullptr, "there are no Ray workers"},
    {"--disable-custom-all-reduce", nullptr, Arity::kBool, nullptr, "there is no all-reduce"},
    {"--worker-cls", nullptr, Arity::kValue, nullptr, "there are no worker processes"},
    {"--worker-extension-cls", nullptr, Arity::kValue, nullptr, "there are no worker processes"},
    {"--enable-multimodal-encoder-data-parallel", nullptr, Arity::kSwitch, nullptr,
     "no multimodal encoder"},
    {"--headless", nullptr, Arity::kSwitch, "", "this process always serves its API"},
    {"--api-server-count", nullptr, Arity::kValue, "1", "one API server per process"},
    {"--grpc", nullptr, Arity::kSwitch, "", "the API is HTTP only"},
    {"--uds", nullptr, Arity::kValue, "", "the server listens on TCP (--host, --port)"},
    {"--data-parallel-supervisor-port", nullptr, Arity::kValue, nullptr, "one engine per process"},
    {"--dp-supervisor-probe-interval-s", nullptr, Arity::kValue, nullptr, "one engine per process"},
    {"--dp-supervisor-probe-timeout-s", nullptr, Arity::kValue, nullptr, "one engine per process"},
    {"--dp-supervisor-probe-failure-threshold", nullptr, Arity::kValue, nullptr,
     "one engine per process"},
    // KV cache.
    {"--prefix-caching-hash-algo", nullptr, Arity::kValue, nullptr,
     "prefix blocks are keyed by SHA-256 of their tokens"},
    {"--cpu-offload-gb", nullptr, Arity::kValue, nullptr, "weights are in host memory already"},
    {"--kv-sharing-fast-prefill", nullptr, Arity::kBool, nullptr,
     "no supported architecture shares KV across layers"},
    {"--mamba-cache-dtype", nullptr, Arity::kValue, nullptr, "no Mamba architectures"},
    {"--mamba-ssm-cache-dtype", nullptr, Arity::kValue, nullptr, "no Mamba architectures"},
    {"--mamba-block-size", nullptr, Arity::kValue, nullptr, "no Mamba architectures"},
    // Multimodal.
    {"--limit-mm-per-prompt", nullptr, Arity::kValue, nullptr, "no multimodal inputs"},
    {"--enable-mm-embeds", nullptr, Arity::kBool, nullptr, "no multimodal inputs"},
    {"--media-io-kwargs", nullptr, Arity::kValue, nullptr, "no multimodal inputs"},
    {"--mm-processor-kwargs", nullptr, Arity::kValue, nullptr, "no multimodal inputs"},
    {"--mm-processor-cache-gb", nullptr, Arity::kValue, nullptr, "no multimodal inputs"},
    {"--disable-mm-preprocessor-cache", nullptr, Arity::kSwitch, nullptr, "no multimodal inputs"},
    {"--mm-processor-cache-type", nullptr, Arity::kValue, nullptr, "no multimodal inputs"},
    {"--mm-shm-cache-max-object-size-mb", nullptr, Arity::kValue, nullptr, "no multimodal inputs"},
    {"--mm-encoder-tp-mode", nullptr, Arity::kValue, nullptr, "no multimodal inputs"},
    {"--mm-encoder-attn-backend", nullptr, Arity::kValue, nullptr, "no multimodal inputs"},
    {"--interleave-mm-strings", nullptr, Arity::kBool, nullptr, "no multimodal inputs"},
    {"--skip-mm-profiling", nullptr, Arity::kBool, nullptr, "no multimodal inputs"},
    {"--video-pruning-rate", nullptr, Arity::kValue, nullptr, "no multimodal inputs"},
    {"--disable-chunked-mm-input", nullptr, Arity::kBool, nullptr, "no multimodal inputs"},
    // LoRA: serving without the adapter would answer with the base model, so an adapter is an
    // error; the capacity flags alone change nothing.
    {"--enable-lora", nullptr, Arity::kBool, nullptr,
     "LoRA adapters are not supported (--lora-modules is an error)"},
    {"--lora-modules", nullptr, Arity::kValues, "", "LoRA adapters are not supported"},
    {"--max-loras", nullptr, Arity::kValue, nullptr, "LoRA adapters are not supported"},
    {"--max-lora-rank", nullptr, Arity::kValue, nullptr, "LoRA adapters are not supported"},
    {"--lora-extra-vocab-size", nullptr, Arity::kValue, nullptr, "LoRA adapters are not supported"},
    {"--lora-dtype", nullptr, Arity::kValue, nullptr, "LoRA adapters are not supported"},
    {"--max-cpu-loras", nullptr, Arity::kValue, nullptr, "LoRA adapters are not supported"},
    {"--fully-sharded-loras", nullptr, Arity::kBool, nullptr, "LoRA adapters are not supported"},
    {"--default-mm-loras", nullptr, Arity::kValue, nullptr, "LoRA adapters are not supported"},
    // Observability.
    {"--show-hidden-metrics-for-version", nullptr, Arity::kValue, nullptr,
     "every metric this server has is always shown"},
    {"--otlp-traces-endpoint", nullptr, Arity::kValue, nullptr,
     "OpenTelemetry tracing is not built in"},
    {"--collect-detailed-traces", nullptr, Arity::kValue, nullptr,
     "OpenTelemetry tracing is not built in"},
    {"--aggregate-engine-logging", nullptr, Arity::kSwitch, nullptr,
     "there is one engine; its statistics are logged"},
    {"--enable-per-request-metrics", nullptr, Arity::kSwitch, nullptr,
     "per-request timings are in the Prometheus histograms at /metrics"},
    {"--enable-server-load-tracking", nullptr, Arity::kSwitch, nullptr,
     "the load is always tracked: GET /load reports the requests in flight"},
    {"--enable-log-outputs", nullptr, Arity::kSwitch, nullptr,
     "outputs are not logged; their token counts are at /metrics"},
    {"--log-config-file", nullptr, Arity::kValue, nullptr,
     "logging is configured by the flags (-v, --uvicorn-log-level)"},
    {"--log-error-stack", nullptr, Arity::kBool, nullptr,
     "errors are logged with their message; there is no Python stack"},
    {"--enable-log-deltas", nullptr, Arity::kBool, nullptr, "outputs are not logged"},
    // Scheduler.
    {"--num-lookahead-slots", nullptr, Arity::kValue, nullptr,
     "lookahead slots follow --speculative-config"},
    {"--scheduler-cls", nullptr, Arity::kValue, nullptr, "there is one scheduler"},
    {"--async-scheduling", nullptr, Arity::kBool, nullptr,
     "the engine loop schedules and runs on one thread"},
    {"--stream-interval", nullptr, Arity::kValue, nullptr,
     "every engine step's tokens are streamed"},
    // Compilation.
    {"--compilation-config", "-O", Arity::kValue, nullptr, "there is no torch.compile"},
    {"--cudagraph-capture-sizes", nullptr, Arity::kValues, nullptr, "there are no CUDA graphs"},
    {"--cuda-graph-sizes", nullptr, Arity::kValues, nullptr, "there are no CUDA graphs"},
    {"--max-cudagraph-capture-size", nullptr, Arity::kValue, nullptr, "there are no CUDA graphs"},
    {"--max-seq-len-to-capture", nullptr, Arity::kValue, nullptr, "there are no CUDA graphs"},
    // Disaggregation, events, plugins.
    {"--kv-transfer-config", nullptr, Arity::kValue, "",
     "KV transfer between engines is not built"},
    {"--kv-events-config", nullptr, Arity::kValue, nullptr, "KV cache events are not published"},
    {"--additional-config", nullptr, Arity::kValue, nullptr, "there are no platform plugins"},
    {"--middleware", nullptr, Arity::kValue, "", "ASGI middleware cannot run in this server"},
    // Frontend.
    {"--tool-parser-plugin", nullptr, Arity::kValue, nullptr,
     "plugins are not loaded; --tool-call-parser hermes | llama3_json | mistral | pythonic are "
     "built in"},
    {"--tool-server", nullptr, Arity::kValue, "", "built-in tools are not provided"},
    {"--exclude-tools-when-tool-choice-none", nullptr, Arity::kSwitch, nullptr,
     "tool_choice none is the same as no tool_choice here: the tools reach the template"},
    {"--enable-tokenizer-info-endpoint", nullptr, Arity::kSwitch, nullptr,
     "/tokenizer_info is not served"},
    {"--tokens-only", nullptr, Arity::kSwitch, "", "the full API is always served"},
    {"--enable-prompt-tokens-details", nullptr, Arity::kSwitch, nullptr,
     "usage.prompt_tokens_details is always included"},
    {"--fingerprint-mode", nullptr, Arity::kValue, nullptr,
     "responses carry no system_fingerprint"},
    {"--fingerprint-value", nullptr, Arity::kValue, nullptr,
     "responses carry no system_fingerprint"},
    {"--cohere-is-reasoning-model", nullptr, Arity::kBool, nullptr, "the Cohere API is not served"},
    {"--cohere-format", nullptr, Arity::kValue, nullptr, "the Cohere API is not served"},
    {"--enable-ssl-refresh", nullptr, Arity::kSwitch, nullptr,
     "certificates are read once at start-up; restart to change them"},
    {"--h11-max-incomplete-event-size", nullptr, Arity::kValue, nullptr,
     "requests are bounded by --max-body-size"},
    {"--h11-max-header-count", nullptr, Arity::kValue, nullptr,
     "the HTTP parser's own header limits apply"},
    {"--enable-offline-docs", nullptr, Arity::kSwitch, nullptr,
     "there is no Swagger UI; /openapi.json is served"},
    {"--enable-flash-late-interaction", nullptr, Arity::kBool, nullptr,
     "no late-interaction scoring"},
};

std::string Describe(const InertFlag& f, const std::vector<std::string>& values) {
  if (f.arity == Arity::kSwitch || f.arity == Arity::kBool || values.empty()) {
    if (f.arity == Arity::kBool && !values.empty() && values.back() == "false")
      return std::string("--no-") + (f.name + 2);
    return f.name;
  }
  return fmt::format("{} {}", f.name, fmt::join(values, " "));
}

}  // namespace

void VllmInertFlags::Add(CLI::App& app) {
  constexpr int kCount = static_cast<int>(std::size(kFlags));
  for (int i = 0; i < kCount; ++i) {
    const InertFlag& f = kFlags[i];
    std::string names = f.name;
    if (f.alias != nullptr) names = fmt::format("{},{}", f.alias, f.name);
    const std::string help =
        fmt::format("vLLM compatibility: no effect on this engine ({})", f.why);
    std::vector<std::string>* slot = &given_[i];
    CLI::Option* opt = nullptr;
    switch (f.arity) {
      case Arity::kSwitch:
        opt = app.add_flag_callback(
            names, [slot] { slot->push_back("true"); }, help);
        break;
      case Arity::kBool: {
        opt = app.add_flag_callback(
            names, [slot] { slot->push_back("true"); }, help);
        const std::string negated = std::string("--no-") + (f.name + 2);
        app.add_flag_callback(
            negated, [slot] { slot->push_back("false"); },
            "vLLM compatibility: see " + std::string(f.name));
        break;
      }
      case Arity::kValue:
        opt = app.add_option(names, *slot, help)
                  ->expected(1)
                  ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
        break;
      case Arity::kValues:
        opt =
            app.add_option(names, *slot, help)->expected(1, CLI::detail::expected_max_vector_size);
        break;
      case Arity::kOptional:
        opt = app.add_option(names, *slot, help)->expected(0, 1);
        break;
    }
    options_.push_back(opt);
  }
}

StatusOr<std::vector<std::string>> VllmInertFlags::Check() const {
  std::vector<std::string> notes;
  constexpr int kCount = static_cast<int>(std::size(kFlags));
  for (int i = 0; i < kCount; ++i) {
    const InertFlag& f = kFlags[i];
    const bool seen = options_[i]->count() > 0 || !given_.at(i).empty();
    if (!seen) continue;
    const std::vector<std::string>& values = given_.at(i);
    const std::string shown = Describe(f, values);
    if (f.honoured != nullptr) {
      // A switch that was turned off, or the one value that means "as here", is harmless.
      const bool off = (f.arity == Arity::kSwitch || f.arity == Arity::kBool) &&
                       (values.empty() || values.back() == "false");
      const bool same = f.arity != Arity::kSwitch && f.arity != Arity::kBool &&
                        values.size() == 1 && values[0] == f.honoured;
      if (!off && !same)
        return UnimplementedError(
            fmt::format("{}: not supported by this engine: {}", shown, f.why));
    }
    notes.push_back(fmt::format("{} has no effect on this engine: {}", shown, f.why));
  }
  return notes;
}

const std::map<std::string, std::string>& VllmShortAliases() {
  static const std::map<std::string, std::string> aliases = {
      {"-tp", "--tensor-parallel-size"},
      {"-pp", "--pipeline-parallel-size"},
      {"-dcp", "--decode-context-parallel-size"},
      {"-dp", "--data-parallel-size"},
      {"-dpn", "--data-parallel-rank"},
      {"-dpr", "--data-parallel-start-rank"},
      {"-dpl", "--data-parallel-size-local"},
      {"-dpa", "--data-parallel-address"},
      {"-dpp", "--data-parallel-rpc-port"},
      {"-dpb", "--data-parallel-backend"},
      {"-asc", "--api-server-count"},
  };
  return aliases;
}

}  // namespace pagellm::cli
