// `pagellm serve MODEL`: the OpenAI-compatible HTTP server (vLLM's `vllm serve`) with every
// engine flag, Prometheus metrics at /metrics, and a periodic stats log line.
//
// Start-up: the HTTP port is bound first (so that a port conflict fails fast and /health
// answers 503 while the model loads), then the engine is built and the API goes live.
// SIGINT / SIGTERM: new requests get 503, in-flight ones are aborted (streams end with
// finish_reason "abort"), connections drain, exit code 0. A second signal exits at once.
#include <malloc.h>
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "base/cpu_features.h"
#include "base/cpu_identity.h"
#include "chat/chat_template.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/vllm_inert_flags.h"
#include "engine/async_engine.h"
#include "engine/engine_core.h"
#include "fmt/format.h"
#include "kernels/kernel_tuning.h"
#include "metrics/engine_metrics.h"
#include "metrics/stats_logger.h"
#include "nlohmann/json.hpp"
#include "server/api_server.h"
#include "server/embedding_runner.h"
#include "server/generation_defaults.h"
#include "server/serving_context.h"
#include "spdlog/spdlog.h"

namespace pagellm::cli {
namespace {

struct ServeOptions {
  EngineFlags engine;
  std::string model_tag;  // positional MODEL
  ServerConfig server;
  std::string max_body_size = "8MiB";
  int max_log_len = -1;
  VllmInertFlags inert;
  std::string config_file;  // --config: expanded into flags by main.cc before parsing
  // CORS lists as vLLM takes them: JSON arrays of strings.
  std::string allowed_origins = R"(["*"])";
  std::string allowed_methods = R"(["*"])";
  std::string allowed_headers = R"(["*"])";
  std::string uvicorn_log_level = "info";
  bool disable_uvicorn_access_log = false;
  std::string disable_access_log_for_endpoints;
  bool disable_log_requests = false;
  // The pooling runner: vLLM's --runner / --convert / --task (deprecated) and pooler config.
  std::string runner = "auto";
  std::string convert = "auto";
  std::string task;
  std::string pooler_config;
  std::string override_pooler_config;
};

StatusOr<std::vector<std::string>> ParseStringList(const std::string& flag,
                                                   const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array())
    return InvalidArgumentError(
        fmt::format("{} {}: expected a JSON list of strings, e.g. '[\"*\"]'", flag, text));
  std::vector<std::string> out;
  for (const auto& v : j) {
    if (!v.is_string())
      return InvalidArgumentError(
          fmt::format("{} {}: expected a JSON list of strings", flag, text));
    out.push_back(v.get<std::string>());
  }
  return out;
}

// Resolves the server flags that need checking or converting; start-up fails on any error.
Status FinalizeServerFlags(ServeOptions& o) {
  ServerConfig& sc = o.server;
  ASSIGN_OR_RETURN(sc.allowed_origins, ParseStringList("--allowed-origins", o.allowed_origins));
  ASSIGN_OR_RETURN(sc.allowed_methods, ParseStringList("--allowed-methods", o.allowed_methods));
  ASSIGN_OR_RETURN(sc.allowed_headers, ParseStringList("--allowed-headers", o.allowed_headers));
  static constexpr const char* kLevels[] = {"critical", "error", "warning",
                                            "info",     "debug", "trace"};
  int level = -1;
  for (int i = 0; i < 6; ++i)
    if (o.uvicorn_log_level == kLevels[i]) level = i;
  if (level < 0)
    return InvalidArgumentError(fmt::format(
        "--uvicorn-log-level {}: expected critical, error, warning, info, debug or trace",
        o.uvicorn_log_level));
  // uvicorn logs each request at info: shown at info and below, unless turned off.
  sc.access_log = level >= 3 && !o.disable_uvicorn_access_log;
  size_t pos = 0;
  const std::string& paths = o.disable_access_log_for_endpoints;
  while (!paths.empty() && pos <= paths.size()) {
    const size_t comma = std::min(paths.find(',', pos), paths.size());
    if (comma > pos) sc.access_log_excluded_paths.push_back(paths.substr(pos, comma - pos));
    pos = comma + 1;
  }
  if (o.disable_log_requests) sc.enable_log_requests = false;
  if (!sc.root_path.empty() && (sc.root_path[0] != '/' || sc.root_path.back() == '/'))
    return InvalidArgumentError(fmt::format(
        "--root-path {}: expected a path starting with / and not ending with one, e.g. /api",
        sc.root_path));
  return Status::Ok();
}

// vLLM's runner selection: true for the pooling runner (embeddings), false for generation.
StatusOr<bool> ResolvePoolingRunner(const ServeOptions& o) {
  if (o.runner != "auto" && o.runner != "generate" && o.runner != "pooling")
    return InvalidArgumentError(fmt::format(
        "--runner {}: this engine runs auto, generate or pooling (draft models are given with "
        "--speculative-config)",
        o.runner));
  if (o.convert != "auto" && o.convert != "none" && o.convert != "embed")
    return UnimplementedError(fmt::format(
        "--convert {}: not supported by this engine: only embed (classify and reward heads are "
        "not built)",
        o.convert));
  static constexpr const char* kTasks[] = {"", "auto", "generate", "embed", "embedding"};
  bool known_task = false;
  for (const char* t : kTasks) known_task = known_task || o.task == t;
  if (!known_task)
    return UnimplementedError(fmt::format(
        "--task {}: not supported by this engine: generate or embed (classify, score, reward "
        "and transcription are not built)",
        o.task));
  const bool pooling =
      o.runner == "pooling" || o.convert == "embed" || o.task == "embed" || o.task == "embedding";
  if (pooling && o.runner == "generate")
    return InvalidArgumentError("--runner generate contradicts --convert embed / --task embed");
  if (!o.task.empty() && o.task != "auto")
    spdlog::warn("--task is deprecated in vLLM; use --runner / --convert");
  return pooling;
}

// Shutdown requests from the signal thread, waited for by the main thread.
struct StopSignal {
  std::mutex mu;
  std::condition_variable cv;
  bool loaded = false;
  bool requested = false;
};

// --chat-template: a file, or the template itself. A path-like string naming no file is an
// error (vLLM's rule) rather than a template that prints the path.
StatusOr<std::string> ResolveChatTemplate(const std::string& arg) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(arg, ec)) {
    std::ifstream in(arg, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in) return NotFoundError(fmt::format("cannot read chat template file {}", arg));
    return ss.str();
  }
  if (arg.find("{{") == std::string::npos && arg.find("{%") == std::string::npos) {
    return InvalidArgumentError(fmt::format(
        "The supplied chat template string ({}) appears path-like, but doesn't exist!", arg));
  }
  return arg;
}

// Python's str() of the values vLLM puts in vllm:cache_config_info's labels.
std::string PyStr(bool v) {
  return v ? "True" : "False";
}
template <typename T>
std::string PyStr(const std::optional<T>& v) {
  return v ? std::to_string(*v) : "None";
}

MetricLabels CacheConfigLabels(const EngineCore& core) {
  const EngineConfig& c = core.config();
  const KvCacheReport& r = core.kv_report();
  return {{"block_size", std::to_string(c.block_size)},
          {"gpu_memory_utilization", FormatPrometheusValue(c.gpu_memory_utilization)},
          {"swap_space", FormatPrometheusValue(c.swap_space_gib)},
          // As vLLM: the --kv-cache-dtype as given ("auto", "fp8", "int8", ...).
          {"cache_dtype", std::string(KvCacheDtypeName(c.kv_cache_dtype))},
          {"num_gpu_blocks_override", PyStr(c.num_gpu_blocks_override)},
          {"enable_prefix_caching", PyStr(c.enable_prefix_caching)},
          {"prefix_caching_hash_algo", "sha256"},
          {"num_gpu_blocks", std::to_string(r.num_blocks)},
          {"num_cpu_blocks", std::to_string(r.num_swap_blocks)}};
}

// The model's chat template: --chat-template, else the tokenizer's; none is not an error
// (chat requests then get vLLM's 400 asking for one).
StatusOr<std::optional<ChatTemplate>> LoadChatTemplate(const std::string& arg,
                                                       const Tokenizer& tokenizer) {
  std::string source;
  if (!arg.empty()) {
    ASSIGN_OR_RETURN(source, ResolveChatTemplate(arg));
  } else {
    source = tokenizer.chat_template();
  }
  if (source.empty()) {
    spdlog::warn(
        "The model has no chat template and --chat-template was not given: "
        "/v1/chat/completions will answer 400.");
    return std::optional<ChatTemplate>();
  }
  auto parsed = ChatTemplate::Parse(source);
  if (!parsed.ok()) {
    if (!arg.empty()) return parsed.status().WithContext("--chat-template");
    spdlog::warn(
        "The tokenizer's chat template does not parse ({}); /v1/chat/completions will "
        "answer 400 unless --chat-template is given.",
        parsed.status().message());
    return std::optional<ChatTemplate>();
  }
  return std::optional<ChatTemplate>(std::move(*parsed));
}

int RunServe(ServeOptions& o) {
  // glibc raises its mmap threshold each time a large block is freed; from then on request-sized
  // buffers (an 8 MiB body, its tokens, its JSON) come from the heap arenas and their pages stay
  // with the process, so RSS ratchets up request after request. A fixed threshold keeps every
  // block of 1 MiB or more in its own mapping, unmapped on free, and a few arenas (instead of
  // 8 per core, one per busy HTTP thread) bound what small allocations keep
  // (docs/BENCHMARKS.md, "Large requests").
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  mallopt(M_ARENA_MAX, 4);
  EngineConfig& ec = o.engine.config;
  if (!o.model_tag.empty() && !ec.model.empty() && o.model_tag != ec.model)
    return Fail(fmt::format("two models given: {} and --model {}", o.model_tag, ec.model));
  if (ec.model.empty()) ec.model = o.model_tag;
  if (ec.model.empty()) return Fail("no model: pagellm serve MODEL (or --model MODEL)");
  if (Status st = o.engine.Finalize(); !st.ok()) return Fail(st.message());
  ServerConfig& sc = o.server;
  auto body_limit = ParseByteSize(o.max_body_size);
  if (!body_limit.ok()) return Fail("--max-body-size: " + body_limit.status().message());
  sc.max_body_size = static_cast<size_t>(*body_limit);
  if (o.max_log_len >= 0) sc.max_log_len = o.max_log_len;
  // vLLM reads its key from $VLLM_API_KEY; a deployment moved over keeps its authentication.
  // Precedence: --api-key, then $PAGELLM_API_KEY (CLI11 fills both), then $VLLM_API_KEY.
  if (sc.api_keys.empty()) {
    if (const char* vllm_key = std::getenv("VLLM_API_KEY"); vllm_key != nullptr && *vllm_key)
      sc.api_keys = {vllm_key};
  }
  if (Status st = FinalizeServerFlags(o); !st.ok()) return Fail(st.message());
  auto inert_notes = o.inert.Check();
  if (!inert_notes.ok()) return Fail(inert_notes.status().message());
  for (const std::string& note : *inert_notes) spdlog::warn("{}", note);
  auto pooling = ResolvePoolingRunner(o);
  if (!pooling.ok()) return Fail(pooling.status().message());
  auto pooler = ParsePoolerConfig(o.pooler_config, PoolerConfig());
  if (pooler.ok()) pooler = ParsePoolerConfig(o.override_pooler_config, *pooler);
  if (!pooler.ok()) return Fail(pooler.status().message());
  if (sc.served_model_names.empty()) sc.served_model_names = {ec.model};
  sc.model_path = ec.model;
  if (sc.port < 0 || sc.port > 65535) return Fail(fmt::format("--port {} is not a port", sc.port));
  // One thread per request being served: a full batch of streaming clients plus probes.
  if (sc.http_threads <= 0) sc.http_threads = ec.scheduler.max_num_seqs + 64;

  // Signals go to one thread that waits for them; every other thread (engine, HTTP) starts
  // after this and inherits the mask. A write to a closed socket must fail, not kill us.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  auto stop = std::make_shared<StopSignal>();
  std::thread([stop, stop_signals] {
    for (int count = 0;; ++count) {
      int sig = 0;
      if (sigwait(&stop_signals, &sig) != 0) continue;
      std::unique_lock<std::mutex> lock(stop->mu);
      if (!stop->loaded || count > 0) {
        // Nothing is being served yet (or this is the second signal): leave at once.
        spdlog::warn("Received signal {}; exiting", sig);
        std::_Exit(stop->loaded ? 1 : 0);
      }
      spdlog::info("Received signal {}; shutting down (again to force)", sig);
      stop->requested = true;
      stop->cv.notify_all();
    }
  }).detach();

  ApiServer server(sc);
  if (Status st = server.Start(); !st.ok()) return Fail(st.message());
  spdlog::info("pagellm API server version {} listening on {}://{}:{} (model loading)",
               PAGELLM_VERSION, sc.ssl_certfile.empty() ? "http" : "https", sc.host, server.port());

  auto core = EngineCore::Create(ec);
  if (!core.ok()) {
    server.Stop();
    return Fail(core.status().message());
  }
  auto chat_template = LoadChatTemplate(sc.chat_template, (*core)->tokenizer());
  if (!chat_template.ok()) {
    server.Stop();
    return Fail(chat_template.status().message());
  }
  auto defaults = ResolveGenerationDefaults(sc.generation_config, sc.override_generation_config,
                                            (*core)->model());
  if (!defaults.ok()) {
    server.Stop();
    return Fail(defaults.status().message());
  }
  std::unique_ptr<EmbeddingRunner> embedder;
  if (*pooling) {
    SessionOptions so;
    so.model_path = ec.model;
    so.threads = ec.threads;
    so.max_model_len = (*core)->max_model_len();
    so.block_size = ec.block_size;
    so.float_matrix_dtype = ec.float_matrix_dtype;
    so.quantization = ec.quantization;
    auto runner = EmbeddingRunner::Create(so, *pooler);
    if (!runner.ok()) {
      server.Stop();
      return Fail(runner.status().message());
    }
    embedder = std::move(*runner);
  }
  EngineMetricsConfig mc;
  mc.model_name = sc.model_name();
  mc.max_model_len = (*core)->max_model_len();
  mc.cache_config = CacheConfigLabels(**core);
  if ((*core)->config().speculative.enabled())
    mc.num_speculative_tokens = (*core)->config().speculative.num_speculative_tokens;
  mc.tensor_parallel_size = (*core)->config().tensor_parallel_size;
  EngineMetrics metrics(mc);
  const KvCacheReport report = (*core)->kv_report();
  AsyncEngine engine(std::move(*core), [&metrics](int32_t n) { metrics.OnIteration(n); });
  auto ctx_or = ServingContext::Create(sc, &engine, &metrics, std::move(*chat_template),
                                       std::move(*defaults));
  if (!ctx_or.ok()) {
    server.Stop();
    return Fail(ctx_or.status().message());
  }
  ServingContext& ctx = **ctx_or;
  ctx.set_embedder(embedder.get());
  StatsLogger stats_logger([&engine] { return engine.stats(); }, &metrics, std::chrono::seconds(5));
  if (!sc.disable_log_stats) stats_logger.Start();
  {
    std::lock_guard<std::mutex> lock(stop->mu);
    stop->loaded = true;
  }
  server.SetReady(&ctx);
  spdlog::info(
      "Serving model {} as '{}': max_model_len {}, {} KV blocks of {} tokens ({} "
      "tokens, {:.1f}x max concurrency at full length)",
      ec.model, sc.model_name(), report.max_model_len, report.num_blocks, ec.block_size,
      report.num_tokens, report.max_concurrency);
  spdlog::info("CPU {}: {} kernels, {} ({})", CpuIdentityString(), SimdLevelName(ActiveSimdLevel()),
               KernelTuningString(GetKernelTuning()), CpuFeaturesString());
  spdlog::info(
      "Routes: POST /v1/completions, POST /v1/chat/completions, POST /v1/embeddings, POST "
      "/invocations, GET /v1/models, POST /tokenize, POST /detokenize, GET /health, GET|POST "
      "/ping, GET /load, GET /version, GET /metrics, GET /openapi.json, POST "
      "/reset_prefix_cache{}",
      sc.root_path.empty() ? "" : fmt::format(" (also under {})", sc.root_path));
  if (embedder) spdlog::info("Pooling runner: /v1/embeddings is served; generation is not");
  spdlog::info("Application startup complete: {}://{}:{}",
               sc.ssl_certfile.empty() ? "http" : "https", sc.host, server.port());

  {
    std::unique_lock<std::mutex> lock(stop->mu);
    stop->cv.wait(lock, [&] { return stop->requested; });
  }
  server.BeginShutdown();  // new requests: 503
  engine.Shutdown();       // in-flight requests end with "abort"; blocks are freed
  server.Stop();           // their responses finish; connections close
  stats_logger.Stop();
  spdlog::info("Shutdown complete");
  return 0;
}

}  // namespace

CommandFn RegisterServe(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  app.add_option("model_tag", o->model_tag, "HF model directory or .gguf file (or --model)");
  AddEngineFlags(app, o->engine, /*model_required=*/false, "--seed");
  ServerConfig& s = o->server;
  app.add_option("--host", s.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", s.port, "Port to listen on (0: any free port)")->capture_default_str();
  // One name per use (repeat the flag for aliases), so that a positional MODEL after it is not
  // taken for a second name.
  app.add_option("--served-model-name", s.served_model_names,
                 "Model name clients send as \"model\" (repeatable: the first is reported in "
                 "responses and metrics; default: the model path)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--api-key", s.api_keys,
                 "Require \"Authorization: Bearer <key>\" on /v1/* and /invocations; several "
                 "keys may follow (any one is accepted). Also $PAGELLM_API_KEY, then "
                 "$VLLM_API_KEY")
      ->expected(1, CLI::detail::expected_max_vector_size)
      ->envname("PAGELLM_API_KEY");
  app.add_option("--chat-template", s.chat_template,
                 "Jinja chat template: a file, or the template text (default: the tokenizer's)");
  app.add_option("--max-log-len", o->max_log_len,
                 "Most prompt characters / token ids shown in request logs (default: all)");
  app.add_flag("--enable-log-requests", s.enable_log_requests,
               "Log each request (prompt, ids and sampling parameters), as vLLM");
  app.add_flag("--disable-log-requests", o->disable_log_requests,
               "Do not log each request (the default; vLLM's deprecated spelling)");
  app.add_option("--config", o->config_file,
                 "vLLM's YAML config file: each key is a flag (key: value, flag: true, list: "
                 "[a, b]); flags on the command line win");
  app.add_option("--allowed-origins", o->allowed_origins,
                 "CORS: allowed origins as a JSON list (\"*\": any)")
      ->capture_default_str();
  app.add_option("--allowed-methods", o->allowed_methods,
                 "CORS: allowed methods as a JSON list (\"*\": any)")
      ->capture_default_str();
  app.add_option("--allowed-headers", o->allowed_headers,
                 "CORS: allowed request headers as a JSON list (\"*\": any)")
      ->capture_default_str();
  app.add_flag("--allow-credentials", s.allow_credentials,
               "CORS: allow credentials (cookies, Authorization) from allowed origins");
  app.add_option("--ssl-keyfile", s.ssl_keyfile, "TLS private key (PEM); serve HTTPS");
  app.add_option("--ssl-certfile", s.ssl_certfile, "TLS certificate chain (PEM); serve HTTPS");
  app.add_option("--ssl-ca-certs", s.ssl_ca_certs, "CA certificates for client certificates");
  app.add_option("--ssl-cert-reqs", s.ssl_cert_reqs,
                 "Client certificates: 0 not asked, 1 optional, 2 required (Python's ssl)")
      ->capture_default_str();
  app.add_option("--ssl-ciphers", s.ssl_ciphers, "OpenSSL cipher list for TLS 1.2 and below");
  app.add_option("--root-path", s.root_path,
                 "Path prefix of a path-routing proxy (e.g. /api): every route also answers "
                 "under it, and /openapi.json names it as the server URL");
  app.add_flag("--enable-request-id-headers", s.enable_request_id_headers,
               "Add X-Request-Id to every response (the request's own, else a new one)");
  app.add_option("--uvicorn-log-level", o->uvicorn_log_level,
                 "HTTP server log level: critical | error | warning | info | debug | trace; "
                 "access lines are logged at info")
      ->capture_default_str();
  app.add_flag("--disable-uvicorn-access-log", o->disable_uvicorn_access_log,
               "No access log line per HTTP request");
  app.add_option("--disable-access-log-for-endpoints", o->disable_access_log_for_endpoints,
                 "Comma-separated paths with no access log lines (e.g. /health,/metrics)");
  app.add_flag("--disable-fastapi-docs", s.disable_openapi, "Do not serve /openapi.json");
  app.add_option("--chat-template-content-format", s.chat_template_content_format,
                 "How message content reaches the chat template: auto (from the template) | "
                 "string (text parts joined) | openai (the list of parts)")
      ->capture_default_str();
  app.add_flag("--trust-request-chat-template", s.trust_request_chat_template,
               "Use a request's own chat_template (otherwise such requests get 400)");
  app.add_option("--default-chat-template-kwargs", s.default_chat_template_kwargs,
                 "JSON object of chat template kwargs for every request (request kwargs win), "
                 "e.g. '{\"enable_thinking\": false}'");
  app.add_option("--response-role", s.response_role, "Role of chat replies to a generation prompt")
      ->capture_default_str();
  app.add_flag("--return-tokens-as-token-ids", s.return_tokens_as_token_ids,
               "Logprob tokens as \"token_id:<id>\" by default (the request field overrides)");
  app.add_flag("--enable-force-include-usage", s.enable_force_include_usage,
               "Every streamed response ends with a usage chunk");
  app.add_flag("--enable-auto-tool-choice", s.enable_auto_tool_choice,
               "tool_choice \"auto\": parse the model's tool calls with --tool-call-parser "
               "(without it such requests get 400)");
  app.add_option("--tool-call-parser", s.tool_call_parser,
                 "Tool-call format of the model: hermes | llama3_json | mistral | pythonic");
  app.add_option("--reasoning-parser", s.reasoning_parser,
                 "Split <think>...</think> into reasoning_content: deepseek_r1 | qwen3 "
                 "(structured output starts after the reasoning)");
  app.add_option("--generation-config", s.generation_config,
                 "Sampling defaults: auto (the model's generation_config.json) | vllm (vLLM's "
                 "defaults) | a directory with a generation_config.json; its max_new_tokens "
                 "caps every request")
      ->capture_default_str();
  app.add_option("--override-generation-config", s.override_generation_config,
                 "JSON object over the generation config, e.g. '{\"temperature\": 0.5}'");
  app.add_option("--runner", o->runner,
                 "auto | generate | pooling (pooling: serve /v1/embeddings from the model's "
                 "final hidden states instead of generating)")
      ->capture_default_str();
  app.add_option("--convert", o->convert, "auto | none | embed (embed: the pooling runner)")
      ->capture_default_str();
  app.add_option("--task", o->task, "vLLM's deprecated task: generate | embed (| embedding)");
  app.add_option("--pooler-config", o->pooler_config,
                 "Pooling runner: JSON {\"pooling_type\": \"LAST\" | \"MEAN\" | \"CLS\", "
                 "\"normalize\": bool} (default LAST, normalized)");
  app.add_option("--override-pooler-config", o->override_pooler_config,
                 "vLLM's deprecated spelling of --pooler-config, applied over it");
  o->inert.Add(app);
  app.add_flag("--disable-log-stats", s.disable_log_stats,
               "Do not log throughput / queue / KV usage every 5 s");
  app.add_option("--max-queued-requests", s.max_queued_requests,
                 "Most requests waiting to start; beyond it new requests get 503 (0: no limit)")
      ->capture_default_str();
  app.add_option("--max-body-size", o->max_body_size,
                 "Largest request body (e.g. 8MiB); larger ones get 413")
      ->capture_default_str();
  app.add_option("--http-threads", s.http_threads,
                 "Requests served at once, one thread each, streams included (default: "
                 "--max-num-seqs + 64); connections waiting for a request need no thread");
  app.add_option("--max-connections", s.max_connections,
                 "Open client connections in all; more get 503 at once (0: as many as the "
                 "open-file limit allows)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-connections-per-client", s.max_connections_per_client,
                 "Open connections from one client address; more get 503 (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--http-header-timeout", s.header_timeout_s,
                 "Seconds a request's whole head (request line and headers) may take to "
                 "arrive; slower clients get 408 and are closed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--timeout-keep-alive", s.keep_alive_timeout_s,
                 "Seconds an idle kept-alive connection stays open (uvicorn's flag)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  return [o] { return RunServe(*o); };
}

}  // namespace pagellm::cli
