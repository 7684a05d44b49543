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

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "engine/async_engine.h"
#include "engine/engine_core.h"
#include "fmt/format.h"
#include "metrics/engine_metrics.h"
#include "metrics/stats_logger.h"
#include "server/api_server.h"
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
};

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
  if (sc.api_key.empty()) {
    if (const char* vllm_key = std::getenv("VLLM_API_KEY"); vllm_key != nullptr)
      sc.api_key = vllm_key;
  }
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
  spdlog::info("pagellm API server version {} listening on http://{}:{} (model loading)",
               PAGELLM_VERSION, sc.host, server.port());

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
  EngineMetricsConfig mc;
  mc.model_name = sc.model_name();
  mc.max_model_len = (*core)->max_model_len();
  mc.cache_config = CacheConfigLabels(**core);
  if ((*core)->config().speculative.enabled())
    mc.num_speculative_tokens = (*core)->config().speculative.num_speculative_tokens;
  EngineMetrics metrics(mc);
  const KvCacheReport report = (*core)->kv_report();
  AsyncEngine engine(std::move(*core), [&metrics](int32_t n) { metrics.OnIteration(n); });
  ServingContext ctx(sc, &engine, &metrics, std::move(*chat_template));
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
  spdlog::info(
      "Routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, POST "
      "/tokenize, POST /detokenize, GET /health, GET /version, GET /metrics, POST "
      "/reset_prefix_cache");
  spdlog::info("Application startup complete: http://{}:{}", sc.host, server.port());

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
  app.add_option("--api-key", s.api_key,
                 "Require \"Authorization: Bearer <key>\" on /v1/* (also $PAGELLM_API_KEY, then "
                 "$VLLM_API_KEY)")
      ->envname("PAGELLM_API_KEY");
  app.add_option("--chat-template", s.chat_template,
                 "Jinja chat template: a file, or the template text (default: the tokenizer's)");
  app.add_option("--max-log-len", o->max_log_len,
                 "Most prompt characters / token ids shown in request logs (default: all)");
  app.add_flag("--disable-log-requests", s.disable_log_requests, "Do not log each request");
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
