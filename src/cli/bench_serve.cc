// `pagellm bench serve`: a streaming load test of any OpenAI-compatible server (ours, llama.cpp's
// llama-server, vLLM), reporting what `vllm bench serve` reports: request and token throughput,
// goodput under SLOs, and mean / median / percentiles of TTFT, TPOT, ITL and E2EL.
//
// Requests are released at Poisson (or gamma, --burstiness) arrival times, or all at once with
// --request-rate inf; --max-concurrency caps how many are in flight (a released request waits
// for a free slot, and its clock starts when it is sent). Each request runs on its own thread
// with its own connection. Multi-turn conversations are the unit of arrival and concurrency:
// their turns run one after another, each resending the whole history.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <limits>
#include <memory>
#include <semaphore>
#include <sstream>
#include <thread>
#include <vector>

#include "bench/arrivals.h"
#include "bench/openai_client.h"
#include "bench/serve_metrics.h"
#include "cli/bench_commands.h"
#include "cli/bench_serve_workload.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace pagellm::cli {
namespace {

using bench::BenchClock;

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

StatusOr<double> ParseRate(const std::string& s) {
  if (s == "inf" || s == "Inf" || s == "INF") return std::numeric_limits<double>::infinity();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v > 0))
    return InvalidArgumentError(fmt::format("--request-rate must be > 0 or inf, got '{}'", s));
  return v;
}

StatusOr<bench::ReportOptions> ParseReportOptions(const ServeOptions& o) {
  bench::ReportOptions r;
  r.metrics = SplitList(o.percentile_metrics);
  for (const std::string& m : r.metrics)
    if (m != "ttft" && m != "tpot" && m != "itl" && m != "e2el")
      return InvalidArgumentError(
          fmt::format("--percentile-metrics: unknown metric '{}' (ttft, tpot, itl, e2el)", m));
  r.percentiles.clear();
  for (const std::string& p : SplitList(o.metric_percentiles)) {
    char* end = nullptr;
    const double v = std::strtod(p.c_str(), &end);
    if (*end != '\0' || !(v > 0 && v <= 100))
      return InvalidArgumentError(fmt::format("--metric-percentiles: bad percentile '{}'", p));
    r.percentiles.push_back(v);
  }
  if (o.max_concurrency > 0) r.max_concurrency = o.max_concurrency;
  return r;
}

// The served model name when --model is not given: the first entry of GET /v1/models.
StatusOr<std::string> DiscoverModel(bench::HttpClient& client) {
  ASSIGN_OR_RETURN(bench::HttpResponse res, client.Get("/v1/models"));
  nlohmann::json j = nlohmann::json::parse(res.body, nullptr, false);
  if (res.status == 200 && j.is_object() && j.contains("data") && j["data"].is_array() &&
      !j["data"].empty() && j["data"][0].contains("id") && j["data"][0]["id"].is_string())
    return j["data"][0]["id"].get<std::string>();
  return FailedPreconditionError(
      fmt::format("GET /v1/models gave HTTP {} without a model; pass --model", res.status));
}

std::string NowIso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return buf;
}

struct Run {
  const ServeOptions& o;
  const ServeWorkload& w;
  const bench::HttpTarget& target;
  bench::CompletionSettings settings;
  std::string api_key;
  std::vector<bench::RequestResult> results;
  BenchClock::time_point start;

  nlohmann::json Payload(const nlohmann::json& prompt_or_messages, int max_tokens) const {
    return settings.chat ? bench::BuildChatPayload(settings, prompt_or_messages, max_tokens)
                         : bench::BuildCompletionPayload(settings, prompt_or_messages, max_tokens);
  }

  void RunSingle(size_t j, bench::HttpClient& client) {
    const SingleRequest& r = w.requests[j];
    nlohmann::json prompt = r.prompt;
    if (settings.chat) prompt = nlohmann::json::array({{{"role", "user"}, {"content", r.prompt}}});
    results[j] = bench::SendStreamingRequest(client, settings, Payload(prompt, r.output_len),
                                             r.prompt_len, start);
  }

  // Turn t sends: completions, the previous prompt + its output + "\n\n" + the new user text;
  // chat, the message list with every earlier user and assistant message.
  void RunConversation(size_t j, bench::HttpClient& client) {
    const bench::Conversation& c = w.conversations[j];
    const size_t turns = c.user_turns.size();
    std::string history;
    nlohmann::json messages = nlohmann::json::array();
    bool failed = false;
    for (size_t t = 0; t < turns; ++t) {
      bench::RequestResult& res = results[j * turns + t];
      if (failed) {
        res.error = "skipped: an earlier turn of this conversation failed";
      } else if (settings.chat) {
        messages.push_back({{"role", "user"}, {"content", c.user_turns[t]}});
        res = bench::SendStreamingRequest(client, settings, Payload(messages, c.output_lens[t]), 0,
                                          start);
        messages.push_back({{"role", "assistant"}, {"content", res.generated_text}});
      } else {
        const std::string prompt = history + c.user_turns[t];
        res = bench::SendStreamingRequest(client, settings, Payload(prompt, c.output_lens[t]), 0,
                                          start);
        history = prompt + res.generated_text + "\n\n";
      }
      res.conversation = static_cast<int>(j);
      res.turn = static_cast<int>(t);
      failed = failed || !res.success;
    }
  }

  // Releases job j at arrivals[j] (seconds after start), at most `max_concurrency` at a time.
  double Dispatch(const std::vector<double>& arrivals) {
    std::unique_ptr<std::counting_semaphore<>> slots;
    if (o.max_concurrency > 0)
      slots = std::make_unique<std::counting_semaphore<>>(o.max_concurrency);
    std::vector<std::thread> threads;
    threads.reserve(arrivals.size());
    start = BenchClock::now();
    for (size_t j = 0; j < arrivals.size(); ++j) {
      std::this_thread::sleep_until(start + std::chrono::duration_cast<BenchClock::duration>(
                                                std::chrono::duration<double>(arrivals[j])));
      if (slots) slots->acquire();
      threads.emplace_back([this, j, &slots] {
        bench::HttpClient client(target, o.timeout_s, api_key);
        if (w.conversations.empty()) {
          RunSingle(j, client);
        } else {
          RunConversation(j, client);
        }
        if (slots) slots->release();
      });
    }
    for (std::thread& t : threads) t.join();
    return std::chrono::duration<double>(BenchClock::now() - start).count();
  }
};

nlohmann::json ResultJson(const Run& run, const bench::BenchmarkMetrics& m,
                          const bench::ReportOptions& report, double rate) {
  const ServeOptions& o = run.o;
  nlohmann::json j = {
      {"date", NowIso()},
      {"backend", run.settings.chat ? "openai-chat" : "openai"},
      {"base_url", o.base_url},
      {"endpoint", o.endpoint},
      {"model_id", run.settings.model},
      {"tokenizer", run.w.tokenizer},
      {"dataset", o.dataset},
      {"num_prompts", run.results.size()},
      {"request_rate", std::isinf(rate) ? nlohmann::json("inf") : nlohmann::json(rate)},
      {"burstiness", o.burstiness},
      {"max_concurrency",
       o.max_concurrency > 0 ? nlohmann::json(o.max_concurrency) : nlohmann::json()},
      {"seed", o.seed},
  };
  if (o.dataset == "prefix-sharing")
    j["prefix_sharing"] = {{"num_prefixes", o.num_prefixes},
                           {"prefix_len", o.prefix_len},
                           {"suffix_len", o.suffix_len}};
  j.update(bench::MetricsJson(m, report));
  nlohmann::json in = nlohmann::json::array(), out = nlohmann::json::array(),
                 ttfts = nlohmann::json::array(), itls = nlohmann::json::array(),
                 e2els = nlohmann::json::array(), starts = nlohmann::json::array(),
                 errors = nlohmann::json::array();
  for (const bench::RequestResult& r : run.results) {
    in.push_back(r.prompt_len);
    out.push_back(r.output_len);
    ttfts.push_back(r.ttft);
    itls.push_back(r.itl);
    e2els.push_back(r.latency);
    starts.push_back(r.start);
    errors.push_back(r.error);
  }
  j["input_lens"] = in;
  j["output_lens"] = out;
  j["ttfts"] = ttfts;  // seconds, as vLLM stores them
  j["itls"] = itls;
  j["e2els"] = e2els;
  j["start_times"] = starts;
  j["errors"] = errors;
  if (!run.w.conversations.empty()) {
    nlohmann::json turns = nlohmann::json::array();
    for (const auto& [turn, t] : bench::SummarizeByTurn(run.results))
      turns.push_back({{"turn", turn},
                       {"requests", t.requests},
                       {"mean_prompt_tokens", t.mean_prompt_len},
                       {"mean_ttft_ms", t.mean_ttft_ms}});
    j["per_turn"] = turns;
  }
  return j;
}

int RunServe(ServeOptions& o) {
  auto rate = ParseRate(o.request_rate);
  if (!rate.ok()) return Fail(rate.status().message());
  auto report = ParseReportOptions(o);
  if (!report.ok()) return Fail(report.status().message());
  report->request_rate = *rate;
  auto slos = bench::ParseGoodput(o.goodput);
  if (!slos.ok()) return Fail(slos.status().message());
  report->goodput = slos->any();
  auto target = bench::ParseBaseUrl(o.base_url);
  if (!target.ok()) return Fail(target.status().message());
  if (o.max_concurrency < 0) return Fail("--max-concurrency must be >= 0");

  bench::CompletionSettings settings;
  settings.endpoint = o.endpoint;
  settings.chat = o.endpoint.find("chat/completions") != std::string::npos;
  settings.ignore_eos = o.ignore_eos;
  settings.temperature = o.temperature;
  if (!o.extra_body.empty()) {
    settings.extra_body = nlohmann::json::parse(o.extra_body, nullptr, false);
    if (!settings.extra_body.is_object()) return Fail("--extra-body must be a JSON object");
  }
  std::string api_key = o.api_key;
  if (const char* env = std::getenv("OPENAI_API_KEY"); api_key.empty() && env != nullptr)
    api_key = env;

  bench::HttpClient client(*target, o.timeout_s, api_key);
  if (o.model.empty()) {
    auto model = DiscoverModel(client);
    if (!model.ok()) return Fail(model.status().message());
    o.model = *model;
  }
  settings.model = o.model;
  auto workload = BuildServeWorkload(o, client);
  if (!workload.ok()) return Fail(workload.status().message());
  const ServeWorkload& w = *workload;
  if (settings.chat && !w.text_prompts)
    return Fail(
        "token-id prompts (random, prefix-sharing) need a completions endpoint; use "
        "--dataset tinystories or multi-turn with a chat endpoint");

  if (!o.skip_test_request) {
    spdlog::info("initial test request to {}{} ...", o.base_url, o.endpoint);
    nlohmann::json probe = w.probe_prompt;
    if (settings.chat) probe = nlohmann::json::array({{{"role", "user"}, {"content", probe}}});
    const nlohmann::json payload = settings.chat
                                       ? bench::BuildChatPayload(settings, probe, 2)
                                       : bench::BuildCompletionPayload(settings, probe, 2);
    bench::RequestResult r =
        bench::SendStreamingRequest(client, settings, payload, 0, BenchClock::now());
    if (!r.success) return Fail("initial test request failed: " + r.error);
  }

  Run run{o, w, *target, settings, api_key, {}, {}};
  const bool multi_turn = !w.conversations.empty();
  const size_t jobs = multi_turn ? w.conversations.size() : w.requests.size();
  const size_t turns = multi_turn ? w.conversations[0].user_turns.size() : 1;
  run.results.resize(jobs * turns);
  auto arrivals = bench::ArrivalTimes(static_cast<int>(jobs), *rate, o.burstiness, o.seed);
  if (!arrivals.ok()) return Fail(arrivals.status().message());
  spdlog::info(
      "{} {} ({} dataset, tokenizer {}), request rate {}, burstiness {}, max concurrency {}", jobs,
      multi_turn ? "conversations" : "requests", o.dataset, w.tokenizer, o.request_rate,
      o.burstiness, o.max_concurrency > 0 ? std::to_string(o.max_concurrency) : "unlimited");
  const double duration = run.Dispatch(*arrivals);

  const bench::BenchmarkMetrics m =
      bench::ComputeMetrics(run.results, duration, *slos, report->percentiles);
  const nlohmann::json result = ResultJson(run, m, *report, *rate);
  if (o.json_file == "-") {
    fmt::print("{}\n", result.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{}", bench::FormatReport(m, *report));
    if (multi_turn) {
      fmt::print("{:<6} {:>9} {:>20} {:>16}\n", "Turn", "Requests", "Mean prompt tokens",
                 "Mean TTFT (ms)");
      for (const auto& [turn, t] : bench::SummarizeByTurn(run.results))
        fmt::print("{:<6} {:>9} {:>20.1f} {:>16.2f}\n", turn + 1, t.requests, t.mean_prompt_len,
                   t.mean_ttft_ms);
    }
    if (!o.json_file.empty()) {
      std::ofstream f(o.json_file);
      if (!f) return Fail("cannot write " + o.json_file);
      f << result.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
  }
  if (m.failed > 0) {
    for (const bench::RequestResult& r : run.results)
      if (!r.success) {
        spdlog::warn("{} of {} requests failed; first error: {}", m.failed, run.results.size(),
                     r.error);
        break;
      }
  }
  return m.completed > 0 ? 0 : 1;
}

}  // namespace

CommandFn RegisterBenchServe(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  app.add_option("--base-url", o->base_url, "Server URL (scheme://host:port[/prefix])")
      ->capture_default_str();
  app.add_option("--endpoint", o->endpoint,
                 "Completions route; a route containing chat/completions sends chat messages")
      ->capture_default_str();
  app.add_option("--model", o->model, "Model name sent to the server (default: GET /v1/models)");
  app.add_option("--tokenizer-model", o->tokenizer_model,
                 "Local HF model directory or .gguf whose tokenizer builds the prompts "
                 "(default: --model when it is a path, else the server's /tokenize)");
  app.add_option("--api-key", o->api_key, "Bearer token (default: $OPENAI_API_KEY)");
  app.add_option("--num-prompts", o->num_prompts, "Requests (random, tinystories, prefix-sharing)")
      ->capture_default_str();
  app.add_option("--request-rate", o->request_rate,
                 "Requests (multi-turn: conversations) per second; inf sends all at once")
      ->capture_default_str();
  app.add_option("--burstiness", o->burstiness,
                 "Gamma shape of the inter-arrival times: 1 = Poisson, <1 burstier")
      ->capture_default_str();
  app.add_option("--max-concurrency", o->max_concurrency,
                 "Most requests (multi-turn: conversations) in flight; 0 = unlimited")
      ->capture_default_str();
  app.add_option("--dataset", o->dataset, "random | tinystories | prefix-sharing | multi-turn")
      ->capture_default_str();
  app.add_option("--dataset-path", o->dataset_path,
                 "TinyStories text (default: ../shared/data/tinystories_sample.txt)");
  app.add_option("--input-len", o->input_len, "Prompt tokens (random, tinystories)")
      ->capture_default_str();
  app.add_option("--output-len", o->output_len, "max_tokens of every request")
      ->capture_default_str();
  app.add_option("--range-ratio", o->range_ratio,
                 "Sample lengths uniformly in [L(1-R), L(1+R)], R in [0, 1)")
      ->capture_default_str();
  app.add_option("--output-range-ratio", o->output_range_ratio,
                 "Range ratio of the output lengths alone (default: --range-ratio), e.g. "
                 "--input-len 1056 --range-ratio 0.93939 --output-len 136 --output-range-ratio "
                 "0.88235 draws prompts of 64-2048 tokens and outputs of 16-256");
  app.add_option("--num-prefixes", o->num_prefixes, "prefix-sharing: distinct shared prefixes")
      ->capture_default_str();
  app.add_option("--prefix-len", o->prefix_len, "prefix-sharing: tokens of each shared prefix")
      ->capture_default_str();
  app.add_option("--suffix-len", o->suffix_len, "prefix-sharing: unique tokens after the prefix")
      ->capture_default_str();
  app.add_option("--num-conversations", o->num_conversations, "multi-turn: conversations")
      ->capture_default_str();
  app.add_option("--turns", o->turns, "multi-turn: turns per conversation")->capture_default_str();
  app.add_option("--turn-len", o->turn_len, "multi-turn: tokens of new user text per turn")
      ->capture_default_str();
  app.add_option("--vocab-size", o->vocab_size,
                 "Random token ids below this (when no tokenizer is available)");
  app.add_option("--goodput", o->goodput, "SLOs in ms, e.g. --goodput ttft:500 tpot:50 e2el:5000");
  app.add_option("--seed", o->seed, "Seed of the prompts and arrival times")->capture_default_str();
  app.add_option("--json", o->json_file,
                 "Write vLLM-style result JSON (metrics plus per-request lists) to FILE; - prints "
                 "it instead of the table");
  app.add_option("--extra-body", o->extra_body,
                 "JSON object merged into every request body, e.g. '{\"cache_prompt\": true}'");
  app.add_option("--temperature", o->temperature, "Sampling temperature")->capture_default_str();
  app.add_flag("--ignore-eos,!--no-ignore-eos", o->ignore_eos,
               "Send ignore_eos so that every request generates --output-len tokens (default on)");
  app.add_option("--percentile-metrics", o->percentile_metrics,
                 "Metrics to report: comma list of ttft,tpot,itl,e2el")
      ->capture_default_str();
  app.add_option("--metric-percentiles", o->metric_percentiles,
                 "Percentiles to report, comma list, e.g. 50,90,99")
      ->capture_default_str();
  app.add_option("--timeout", o->timeout_s, "Seconds to wait for any read of a response")
      ->capture_default_str();
  app.add_flag("--skip-test-request", o->skip_test_request,
               "Do not send the short readiness request before the benchmark");
  return [o]() { return RunServe(*o); };
}

}  // namespace pagellm::cli
