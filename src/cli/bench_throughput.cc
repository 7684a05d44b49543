// `pagellm bench throughput`: offline throughput as vLLM's `bench throughput` measures it. All
// requests go to the engine at once and are served with continuous batching on this thread;
// every request generates exactly its output length (ignore_eos). Beyond vLLM it reports the
// number of preemptions and the KV-cache waste: after every engine step it samples the slots of
// the blocks held by running requests (allocated) and the slots holding a computed token (used),
// and reports sum(allocated - used) / sum(allocated) over all steps.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/datasets.h"
#include "cli/bench_commands.h"
#include "cli/engine_flags.h"
#include "engine/engine_core.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "spec/speculative_config_parser.h"

namespace pagellm::cli {
namespace {

struct ThroughputOptions {
  EngineFlags engine;
  int num_prompts = 1000;
  int input_len = 1024;
  int output_len = 128;
  double range_ratio = 0;
  std::string dataset = "random";
  std::string dataset_path;
  double temperature = 1.0;  // vLLM's bench throughput samples at temperature 1, top_p 1
  bool json = false;
};

// Sums over engine steps.
struct StepTotals {
  int64_t steps = 0;
  int64_t slots_allocated = 0;
  int64_t slots_used = 0;
  int64_t running = 0;  // requests running after each step (for the mean batch size)
  double peak_kv_usage = 0;
};

StatusOr<std::vector<bench::TokenPrompt>> BuildPrompts(const ThroughputOptions& o,
                                                       const EngineCore& core) {
  const uint64_t seed = o.engine.config.seed;
  if (o.dataset == "random") {
    bench::RandomDatasetOptions r;
    r.num_prompts = o.num_prompts;
    r.input_len = o.input_len;
    r.output_len = o.output_len;
    r.range_ratio = o.range_ratio;
    r.seed = seed;
    return bench::BuildRandomDataset(
        r, bench::TokenPoolFromTokenizer(core.tokenizer(), core.model_config().vocab_size));
  }
  if (o.dataset == "tinystories") {
    std::string path = o.dataset_path.empty() ? bench::DefaultTinyStoriesPath() : o.dataset_path;
    if (path.empty()) return NotFoundError("no TinyStories text found; pass --dataset-path");
    ASSIGN_OR_RETURN(std::string text, bench::ReadTextFile(path));
    std::unique_ptr<bench::TextTokenizer> tok = bench::MakeLocalTextTokenizer(core.tokenizer());
    bench::TextPromptSource source(bench::SplitStories(text), tok.get());
    bench::TextDatasetOptions t;
    t.num_prompts = o.num_prompts;
    t.input_len = o.input_len;
    t.output_len = o.output_len;
    t.range_ratio = o.range_ratio;
    t.seed = seed;
    ASSIGN_OR_RETURN(std::vector<bench::TextPrompt> texts, bench::BuildTextDataset(t, source));
    std::vector<bench::TokenPrompt> prompts(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      prompts[i].ids = std::move(texts[i].ids);
      prompts[i].output_len = texts[i].output_len;
    }
    return prompts;
  }
  return InvalidArgumentError(
      fmt::format("--dataset must be random or tinystories, got '{}'", o.dataset));
}

int RunThroughput(ThroughputOptions& o) {
  if (Status st = o.engine.Finalize(); !st.ok()) return Fail(st.message());
  auto created = EngineCore::Create(o.engine.config);
  if (!created.ok()) return Fail(created.status().message());
  EngineCore& core = **created;
  auto prompts = BuildPrompts(o, core);
  if (!prompts.ok()) return Fail(prompts.status().message());

  int64_t total_in = 0, expected_out = 0;
  for (size_t i = 0; i < prompts->size(); ++i) {
    const bench::TokenPrompt& p = (*prompts)[i];
    const int64_t need = static_cast<int64_t>(p.ids.size()) + p.output_len;
    if (need > core.max_model_len())
      return Fail(
          fmt::format("request {} needs {} tokens ({} in + {} out) but --max-model-len is {}", i,
                      need, p.ids.size(), p.output_len, core.max_model_len()));
    total_in += static_cast<int64_t>(p.ids.size());
    expected_out += p.output_len;
  }

  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  for (size_t i = 0; i < prompts->size(); ++i) {
    EngineRequest r;
    r.request_id = std::to_string(i);
    r.prompt_token_ids = (*prompts)[i].ids;
    r.params.temperature = static_cast<float>(o.temperature);
    r.params.top_p = 1.0f;
    r.params.ignore_eos = true;
    r.params.max_tokens = (*prompts)[i].output_len;
    if (Status st = core.AddRequest(std::move(r)); !st.ok())
      return Fail(fmt::format("request {}: {}", i, st.message()));
  }
  StepTotals totals;
  int64_t total_out = 0;
  int failed = 0;
  int finished = 0;
  std::string first_error;
  // Progress on stderr for long runs, at most every kProgressSeconds.
  constexpr double kProgressSeconds = 10;
  Clock::time_point last_progress = t0;
  // Pure decode steps (nothing waiting, every running request emits a token): their time and
  // tokens give the decode rate at the batch's context lengths, without prefill.
  double decode_seconds = 0;
  int64_t decode_tokens = 0;
  EngineStats before = core.stats();
  while (core.HasUnfinishedRequests()) {
    const Clock::time_point step_start = Clock::now();
    auto outs = core.Step();
    if (!outs.ok()) return Fail(outs.status().message());
    if (before.num_waiting == 0 && before.num_swapped == 0 && before.num_running > 0 &&
        static_cast<int32_t>(outs->size()) == before.num_running) {
      decode_seconds += std::chrono::duration<double>(Clock::now() - step_start).count();
      decode_tokens += static_cast<int64_t>(outs->size());
    }
    for (const EngineOutput& out : *outs) {
      total_out += static_cast<int64_t>(out.new_token_ids.size());
      finished += out.finished ? 1 : 0;
      if (!out.error.empty() || (out.finished && out.finish_reason == FinishReason::kAbort)) {
        ++failed;
        if (first_error.empty()) first_error = out.error.empty() ? "aborted" : out.error;
      }
    }
    const EngineStats s = core.stats();
    before = s;
    ++totals.steps;
    totals.slots_allocated += s.kv_slots_allocated;
    totals.slots_used += s.kv_slots_used;
    totals.running += s.num_running;
    totals.peak_kv_usage = std::max(totals.peak_kv_usage, s.kv_usage);
    if (std::chrono::duration<double>(Clock::now() - last_progress).count() >= kProgressSeconds) {
      last_progress = Clock::now();
      spdlog::info("{} / {} requests finished, {} output tokens, {} steps", finished,
                   prompts->size(), total_out, totals.steps);
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  if (failed > 0) return Fail(fmt::format("{} requests failed (first: {})", failed, first_error));
  if (total_out != expected_out)
    return Fail(fmt::format("expected {} output tokens, got {}", expected_out, total_out));

  const EngineStats end = core.stats();
  const EngineConfig& c = core.config();
  const double n = static_cast<double>(prompts->size());
  const double kv_waste = totals.slots_allocated > 0
                              ? static_cast<double>(totals.slots_allocated - totals.slots_used) /
                                    static_cast<double>(totals.slots_allocated)
                              : 0.0;
  const double mean_running =
      totals.steps > 0 ? static_cast<double>(totals.running) / static_cast<double>(totals.steps)
                       : 0.0;
  nlohmann::json j = {
      // vLLM's keys first.
      {"elapsed_time", elapsed},
      {"num_requests", prompts->size()},
      {"total_num_tokens", total_in + total_out},
      {"requests_per_second", n / elapsed},
      {"tokens_per_second", static_cast<double>(total_in + total_out) / elapsed},
      {"total_input_tokens", total_in},
      {"total_output_tokens", total_out},
      {"input_tokens_per_second", static_cast<double>(total_in) / elapsed},
      {"output_tokens_per_second", static_cast<double>(total_out) / elapsed},
      {"decode_tokens_per_second", decode_seconds > 0 ? decode_tokens / decode_seconds : 0.0},
      {"decode_steps_tokens", decode_tokens},
      {"kv_cache_dtype", KvCacheDtypeName(core.kv_report().kv_format.storage_dtype)},
      {"num_preemptions", end.num_preemptions},
      {"kv_waste", kv_waste},
      {"kv_slots_allocated_sum", totals.slots_allocated},
      {"kv_slots_used_sum", totals.slots_used},
      {"num_steps", totals.steps},
      {"mean_running_requests", mean_running},
      {"peak_kv_usage", totals.peak_kv_usage},
      {"model", c.model},
      {"dataset", o.dataset},
      {"input_len", o.input_len},
      {"output_len", o.output_len},
      {"range_ratio", o.range_ratio},
      {"max_num_seqs", c.scheduler.max_num_seqs},
      {"max_num_batched_tokens", c.scheduler.max_num_batched_tokens},
      {"block_size", c.block_size},
      {"num_blocks", core.kv_report().num_blocks},
      {"max_model_len", core.max_model_len()},
      {"enable_prefix_caching", c.enable_prefix_caching},
      {"threads", c.threads},
  };
  if (c.speculative.enabled()) {
    // Speculative decoding: vLLM's acceptance figures over the whole run.
    j["speculative_method"] = SpeculativeMethodName(c.speculative.method);
    j["num_speculative_tokens"] = c.speculative.num_speculative_tokens;
    j["spec_num_drafts"] = end.spec_decode.num_drafts;
    j["spec_num_draft_tokens"] = end.spec_decode.num_draft_tokens;
    j["spec_num_accepted_tokens"] = end.spec_decode.num_accepted_tokens;
    j["spec_acceptance_rate"] = end.spec_decode.AcceptanceRate();
    j["spec_mean_acceptance_length"] = end.spec_decode.MeanAcceptanceLength();
  }
  if (o.json) {
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("model {}: {} requests ({} dataset, input {}, output {}, range ratio {})\n", c.model,
             prompts->size(), o.dataset, o.input_len, o.output_len, o.range_ratio);
  fmt::print("engine: max-num-seqs {}, max-num-batched-tokens {}, {} blocks of {} tokens\n",
             c.scheduler.max_num_seqs, c.scheduler.max_num_batched_tokens,
             core.kv_report().num_blocks, c.block_size);
  fmt::print("Throughput: {:.2f} requests/s, {:.2f} total tokens/s, {:.2f} output tokens/s\n",
             n / elapsed, static_cast<double>(total_in + total_out) / elapsed,
             static_cast<double>(total_out) / elapsed);
  fmt::print("{:<32} {:.3f}\n", "Elapsed time (s):", elapsed);
  fmt::print("{:<32} {}\n", "Total num prompt tokens:", total_in);
  fmt::print("{:<32} {}\n", "Total num output tokens:", total_out);
  fmt::print("{:<32} {:.2f} ({} tokens in pure decode steps)\n",
             "Decode tokens/s:", decode_seconds > 0 ? decode_tokens / decode_seconds : 0.0,
             decode_tokens);
  fmt::print("{:<32} {:.2f}\n", "Input tokens/s:", static_cast<double>(total_in) / elapsed);
  fmt::print("{:<32} {:.2f}\n", "Output tokens/s:", static_cast<double>(total_out) / elapsed);
  fmt::print("{:<32} {}\n", "Preemptions:", end.num_preemptions);
  fmt::print("{:<32} {:.2f}% of allocated slots ({} steps)\n", "KV waste:", 100.0 * kv_waste,
             totals.steps);
  fmt::print("{:<32} {:.1f}\n", "Mean running requests/step:", mean_running);
  fmt::print("{:<32} {:.2f}%\n", "Peak KV cache usage:", 100.0 * totals.peak_kv_usage);
  if (c.speculative.enabled()) {
    fmt::print("{:<32} {} k={}: {} drafts, {} draft tokens, {} accepted\n",
               "Speculative decoding:", SpeculativeMethodName(c.speculative.method),
               c.speculative.num_speculative_tokens, end.spec_decode.num_drafts,
               end.spec_decode.num_draft_tokens, end.spec_decode.num_accepted_tokens);
    fmt::print("{:<32} {:.2f}%\n",
               "Draft acceptance rate:", 100.0 * end.spec_decode.AcceptanceRate());
    fmt::print("{:<32} {:.2f}\n",
               "Mean acceptance length:", end.spec_decode.MeanAcceptanceLength());
  }
  return 0;
}

}  // namespace

CommandFn RegisterBenchThroughput(CLI::App& app) {
  auto o = std::make_shared<ThroughputOptions>();
  // --seed seeds both the engine and the dataset, as in vLLM.
  AddEngineFlags(app, o->engine, /*model_required=*/true, "--seed");
  app.add_option("--num-prompts", o->num_prompts, "Number of requests")->capture_default_str();
  app.add_option("--input-len", o->input_len, "Prompt tokens per request")->capture_default_str();
  app.add_option("--output-len", o->output_len, "Generated tokens per request (ignore_eos)")
      ->capture_default_str();
  app.add_option("--range-ratio", o->range_ratio,
                 "Sample lengths uniformly in [L(1-R), L(1+R)] (input and output), R in [0, 1)")
      ->capture_default_str();
  app.add_option("--dataset", o->dataset,
                 "random (uniform token ids, special tokens excluded) | tinystories (text cut "
                 "to --input-len tokens)")
      ->capture_default_str();
  app.add_option("--dataset-path", o->dataset_path,
                 "TinyStories text (default: ../shared/data/tinystories_sample.txt)");
  app.add_option("--temperature", o->temperature, "Sampling temperature of every request")
      ->capture_default_str();
  app.add_flag("--json", o->json, "Print one JSON object");
  return [o]() { return RunThroughput(*o); };
}

}  // namespace pagellm::cli
