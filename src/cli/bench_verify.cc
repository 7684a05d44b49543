// `pagellm bench verify`: what speculative decoding's verification costs. For k = 0..K it times
// one target forward over k + 1 tokens per sequence (with logits for every one of them, as
// verification needs) for `--batch` sequences at `--depth` tokens of context, and reports it
// relative to k = 0 (one ordinary decode step). Speculation pays off when the mean acceptance
// length exceeds this ratio. Median over repetitions.
#include <algorithm>
#include <chrono>
#include <random>

#include "base/cpu_features.h"
#include "cli/bench_commands.h"
#include "engine/model_session.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace pagellm::cli {
namespace {

struct VerifyOptions {
  SessionOptions session;
  int max_k = 8;
  int depth = 128;
  int batch = 1;
  int repetitions = 7;
  bool json = false;
};

double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int RunVerify(const VerifyOptions& o) {
  if (o.batch < 1 || o.max_k < 0 || o.depth < 1 || o.repetitions < 1)
    return Fail("--batch, --depth and --repetitions must be >= 1, --max-k >= 0");
  SessionOptions so = o.session;
  so.require_tokenizer = false;
  so.max_model_len = o.depth + o.max_k + 2;
  const int blocks_per_seq = (so.max_model_len + so.block_size - 1) / so.block_size;
  so.num_kv_blocks = 1 + o.batch * blocks_per_seq;
  auto session = ModelSession::Open(so);
  if (!session.ok()) return Fail(session.status().message());
  ModelSession& s = **session;
  const ModelConfig& c = s.config();
  std::vector<std::vector<int32_t>> tables(o.batch);
  for (int b = 0; b < o.batch; ++b)
    for (int i = 0; i < blocks_per_seq; ++i) tables[b].push_back(1 + b * blocks_per_seq + i);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  ForwardOutput out;
  using Clock = std::chrono::steady_clock;

  // One step: every sequence feeds n tokens at position `start`.
  auto step = [&](int start, int n, bool all_logits) -> StatusOr<double> {
    ForwardBatch fb;
    for (int b = 0; b < o.batch; ++b) {
      for (int i = 0; i < n; ++i) fb.token_ids.push_back(tok(rng));
      fb.seqs.push_back({n, start, tables[b], all_logits});
    }
    auto t0 = Clock::now();
    RETURN_IF_ERROR(s.backend().Forward(fb, &out));
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  // Context, then a warm-up of the largest step.
  if (auto st = step(0, o.depth, false); !st.ok()) return Fail(st.status().message());
  if (auto st = step(o.depth, o.max_k + 1, true); !st.ok()) return Fail(st.status().message());

  std::vector<double> ms(o.max_k + 1);
  // Interleave k values within each repetition so drift in machine load hits all of them.
  std::vector<std::vector<double>> samples(o.max_k + 1);
  for (int r = 0; r < o.repetitions; ++r) {
    for (int k = 0; k <= o.max_k; ++k) {
      auto t = step(o.depth, k + 1, k > 0);
      if (!t.ok()) return Fail(t.status().message());
      samples[k].push_back(*t * 1e3);
    }
  }
  for (int k = 0; k <= o.max_k; ++k) ms[k] = MedianOf(samples[k]);
  nlohmann::json rows = nlohmann::json::array();
  for (int k = 0; k <= o.max_k; ++k)
    rows.push_back({{"k", k}, {"ms", ms[k]}, {"relative_to_decode", ms[k] / ms[0]}});
  if (o.json) {
    nlohmann::json j = {{"model", s.model().path},
                        {"threads", s.pool().num_threads()},
                        {"simd", SimdLevelName(ActiveSimdLevel())},
                        {"depth", o.depth},
                        {"batch", o.batch},
                        {"repetitions", o.repetitions},
                        {"rows", rows}};
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("model {} ({:.1f} MiB), {} threads, {} kernels, batch {}, depth {}, median of {}\n",
             s.model().path, s.model().weights.total_bytes / 1048576.0, s.pool().num_threads(),
             SimdLevelName(ActiveSimdLevel()), o.batch, o.depth, o.repetitions);
  fmt::print("{:>3} {:>12} {:>20}\n", "k", "ms/step", "x one decode step");
  for (int k = 0; k <= o.max_k; ++k)
    fmt::print("{:>3} {:>12.2f} {:>20.2f}\n", k, ms[k], ms[k] / ms[0]);
  return 0;
}

}  // namespace

CommandFn RegisterBenchVerify(CLI::App& app) {
  auto v = std::make_shared<VerifyOptions>();
  app.add_option("--model", v->session.model_path, "HF model directory or .gguf file")->required();
  app.add_option("--max-k", v->max_k, "Largest number of drafts verified (k + 1 tokens)")
      ->capture_default_str();
  app.add_option("-d,--depth", v->depth, "Context in the KV cache")->capture_default_str();
  app.add_option("-b,--batch", v->batch, "Sequences verified in the same step")
      ->capture_default_str();
  app.add_option("-r,--repetitions", v->repetitions, "Runs; the median is reported")
      ->capture_default_str();
  app.add_option("-t,--threads", v->session.threads, "CPU threads (default: all)");
  app.add_option("--block-size", v->session.block_size, "KV cache block size");
  app.add_flag("--json", v->json, "Print one JSON object");
  return [=]() { return RunVerify(*v); };
}

}  // namespace pagellm::cli
