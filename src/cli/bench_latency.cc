// `pagellm bench latency`: single-stream prefill and decode speed, measured like llama.cpp's
// llama-bench (pp: one forward over N prompt tokens; tg: N one-token decode steps; both after
// `--depth` tokens of existing context), reported as the median over repetitions.
#include <algorithm>
#include <chrono>
#include <random>

#include "base/cpu_features.h"
#include "base/cpu_identity.h"
#include "base/huge_page_buffer.h"
#include "cli/bench_commands.h"
#include "cli/engine_flags.h"
#include "cli/vllm_compat_flags.h"
#include "engine/model_session.h"
#include "fmt/format.h"
#include "kernels/kernel_tuning.h"
#include "model/pipeline_stage.h"
#include "nlohmann/json.hpp"

namespace pagellm::cli {
namespace {

struct LatencyOptions {
  SessionOptions session;
  int prompt_tokens = 512;
  int gen_tokens = 128;
  int depth = 0;
  int repetitions = 5;
  bool json = false;
  std::string kv_cache_dtype = "auto";
  std::string dtype = "auto";  // --dtype, as the engine flag
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
};

// Rank 0's time inside the tensor-parallel collectives over the measured steps of one kind.
struct CommTotals {
  int64_t steps = 0;
  double step_seconds = 0, comm_seconds = 0, all_reduce_seconds = 0;
  int64_t all_reduces = 0;

  void Add(const ForwardOutput& out) {
    ++steps;
    comm_seconds += out.comm_seconds;
    all_reduce_seconds += out.all_reduce_seconds;
    all_reduces += out.num_all_reduces;
  }
  nlohmann::json Json() const {
    const double n = std::max<int64_t>(steps, 1);
    return {{"steps", steps},
            {"comm_ms_per_step", 1e3 * comm_seconds / n},
            {"all_reduce_ms_per_step", 1e3 * all_reduce_seconds / n},
            {"all_reduces_per_step", all_reduces / n},
            {"us_per_all_reduce", all_reduces > 0 ? 1e6 * all_reduce_seconds / all_reduces : 0.0},
            {"comm_share_of_step", step_seconds > 0 ? comm_seconds / step_seconds : 0.0}};
  }
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int RunLatency(const LatencyOptions& o) {
  SessionOptions so = o.session;
  so.require_tokenizer = false;
  if (auto dt = ParseKvCacheDtype(o.kv_cache_dtype); dt.ok())
    so.kv_cache_dtype = *dt;
  else
    return Fail(dt.status().message());
  if (auto wd = ParseWeightDtype(o.dtype); wd.ok())
    so.float_matrix_dtype = *wd;
  else
    return Fail(wd.status().message());
  so.max_model_len = o.depth + std::max(o.prompt_tokens, o.gen_tokens) + 1;
  if (o.tensor_parallel_size < 1 || o.pipeline_parallel_size < 1)
    return Fail("--tensor-parallel-size and --pipeline-parallel-size must be >= 1");
  const int ranks = o.tensor_parallel_size * o.pipeline_parallel_size;
  if (ranks > 1) {
    so.tensor_parallel_group = TensorParallelWorld();
    if (so.tensor_parallel_group == nullptr || so.tensor_parallel_group->size() != ranks)
      return Fail(
          "--tensor-parallel-size x --pipeline-parallel-size: this process is not rank 0 of a "
          "group of that size");
    so.pipeline_parallel_size = o.pipeline_parallel_size;
    if (o.pipeline_parallel_size > 1) {
      auto partition = LayerPartitionFromEnvironment();
      if (!partition.ok()) return Fail(partition.status().message());
      so.pipeline_layer_partition = *partition;
    }
  }
  auto session = ModelSession::Open(so);
  if (!session.ok()) return Fail(session.status().message());
  ModelSession& s = **session;
  const ModelConfig& c = s.config();
  std::vector<int32_t> blocks;
  for (int i = 0; i * s.block_size() < s.max_model_len(); ++i) blocks.push_back(i + 1);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  ForwardOutput out;
  using Clock = std::chrono::steady_clock;

  // Fills positions [0, depth) once; every measurement then starts at `depth`. `comm`
  // (may be null) adds up the steps' time in tensor-parallel collectives.
  auto run_chunk = [&](int start, int n, bool one_by_one,
                       CommTotals* comm = nullptr) -> StatusOr<double> {
    auto t0 = Clock::now();
    if (one_by_one) {
      for (int i = 0; i < n; ++i) {
        ForwardBatch b;
        b.token_ids = {tok(rng)};
        b.seqs.push_back({1, start + i, blocks, false});
        RETURN_IF_ERROR(s.backend().Forward(b, &out));
        if (comm != nullptr) comm->Add(out);
      }
    } else {
      ForwardBatch b;
      for (int i = 0; i < n; ++i) b.token_ids.push_back(tok(rng));
      b.seqs.push_back({n, start, blocks, false});
      RETURN_IF_ERROR(s.backend().Forward(b, &out));
      if (comm != nullptr) comm->Add(out);
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (comm != nullptr) comm->step_seconds += seconds;
    return seconds;
  };
  if (o.depth > 0) {
    auto st = run_chunk(0, o.depth, false);
    if (!st.ok()) return Fail(st.status().message());
  }
  // Warm-up (page in the weights, grow scratch buffers).
  if (auto w = run_chunk(o.depth, std::max(1, std::min(o.prompt_tokens, 8)), false); !w.ok())
    return Fail(w.status().message());
  std::vector<double> pp, tg;
  CommTotals pp_comm, tg_comm;
  for (int r = 0; r < o.repetitions; ++r) {
    if (o.prompt_tokens > 0) {
      auto t = run_chunk(o.depth, o.prompt_tokens, false, &pp_comm);
      if (!t.ok()) return Fail(t.status().message());
      pp.push_back(o.prompt_tokens / *t);
    }
    if (o.gen_tokens > 0) {
      auto t = run_chunk(o.depth, o.gen_tokens, true, &tg_comm);
      if (!t.ok()) return Fail(t.status().message());
      tg.push_back(o.gen_tokens / *t);
    }
  }
  const double pp_med = pp.empty() ? 0 : Median(pp);
  const double tg_med = tg.empty() ? 0 : Median(tg);
  const double weight_gb = s.model().weights.total_bytes / 1e9;
  nlohmann::json j = {
      {"model", s.model().path},
      {"weights_bytes", s.model().weights.total_bytes},
      {"threads", s.pool().num_threads()},
      {"tensor_parallel_size", o.tensor_parallel_size},
      {"pipeline_parallel_size", o.pipeline_parallel_size},
      {"simd", SimdLevelName(ActiveSimdLevel())},
      {"cpu", CpuIdentityString()},
      {"kernel_tuning", KernelTuningString(GetKernelTuning())},
      {"depth", o.depth},
      {"kv_cache_dtype", KvCacheDtypeName(s.kv().shape().dtype)},
      {"prompt_tokens", o.prompt_tokens},
      {"gen_tokens", o.gen_tokens},
      {"repetitions", o.repetitions},
      {"prefill_tokens_per_s", pp_med},
      {"decode_tokens_per_s", tg_med},
      {"prefill_samples", pp},
      {"decode_samples", tg},
      // Decode reads every weight once per token: the bandwidth it implies.
      {"decode_weight_gb_per_s", tg_med * weight_gb},
      // After the runs: how much of the process (the packed weight copies above all) sits on
      // 2 MiB pages; -1 where the kernel does not say.
      {"anon_huge_page_bytes", ProcessHugePageBytes()},
  };
  const bool split = o.tensor_parallel_size > 1;
  if (split) {
    // Rank 0's time inside the group's collectives (step broadcast, all-reduces, logits
    // gather) per measured step.
    nlohmann::json comm = nlohmann::json::object();
    if (!pp.empty()) comm["prefill"] = pp_comm.Json();
    if (!tg.empty()) comm["decode"] = tg_comm.Json();
    j["tensor_parallel_comm"] = comm;
  }
  if (o.json) {
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("model {} ({:.1f} MiB), {} threads, {} kernels, depth {}\n", s.model().path,
               s.model().weights.total_bytes / 1048576.0, s.pool().num_threads(),
               SimdLevelName(ActiveSimdLevel()), o.depth);
    fmt::print("cpu {}; kernel tuning {}\n", CpuIdentityString(),
               KernelTuningString(GetKernelTuning()));
    if (!pp.empty())
      fmt::print("prefill pp{}: {:.2f} tokens/s (median of {})\n", o.prompt_tokens, pp_med,
                 pp.size());
    if (!tg.empty())
      fmt::print("decode  tg{}: {:.2f} tokens/s (median of {}; {:.1f} GB/s of weights)\n",
                 o.gen_tokens, tg_med, tg.size(), tg_med * weight_gb);
    if (const int64_t huge = j["anon_huge_page_bytes"].get<int64_t>(); huge >= 0)
      fmt::print("anonymous memory on 2 MiB pages: {:.1f} MiB\n", huge / 1048576.0);
    auto print_comm = [](const char* what, const CommTotals& c) {
      const nlohmann::json k = c.Json();
      fmt::print(
          "{} communication (rank 0): {:.3f} ms/step ({:.1f}% of the step), of which "
          "all-reduce {:.3f} ms/step: {:.0f} all-reduces of {:.1f} us\n",
          what, k["comm_ms_per_step"].get<double>(), 100 * k["comm_share_of_step"].get<double>(),
          k["all_reduce_ms_per_step"].get<double>(), k["all_reduces_per_step"].get<double>(),
          k["us_per_all_reduce"].get<double>());
    };
    if (split && !pp.empty()) print_comm("prefill", pp_comm);
    if (split && !tg.empty()) print_comm("decode ", tg_comm);
  }
  return 0;
}

}  // namespace

CommandFn RegisterBenchLatency(CLI::App& app) {
  auto lat = std::make_shared<LatencyOptions>();
  app.add_option("--model", lat->session.model_path, "HF model directory or .gguf file")
      ->required();
  app.add_option("-p,--prompt-tokens", lat->prompt_tokens, "Prompt tokens per prefill (pp)");
  app.add_option("-n,--gen-tokens", lat->gen_tokens, "Decode steps per run (tg)");
  app.add_option("-d,--depth", lat->depth, "Context already in the KV cache before each run");
  app.add_option("-r,--repetitions", lat->repetitions, "Runs; the median is reported");
  app.add_option("-t,--threads", lat->session.threads, "CPU threads (default: all)");
  app.add_option("--block-size", lat->session.block_size, "KV cache block size");
  app.add_option("--kv-cache-dtype", lat->kv_cache_dtype,
                 "KV cache element type (as the engine flag; auto = the model dtype)")
      ->capture_default_str();
  app.add_option("--dtype", lat->dtype,
                 "Unquantized weight matrices converted to this type at load (as the engine "
                 "flag: auto, half, float16, bfloat16, float, float32)")
      ->capture_default_str();
  app.add_option("--tensor-parallel-size", lat->tensor_parallel_size,
                 "Ranks the model is split across (alias -tp; started through mpirun, --threads "
                 "per rank; docs/PARALLELISM.md)")
      ->capture_default_str();
  app.add_option("--pipeline-parallel-size", lat->pipeline_parallel_size,
                 "Pipeline stages the layers are split into, each of --tensor-parallel-size "
                 "ranks (alias -pp; docs/PARALLELISM.md)")
      ->capture_default_str();
  app.add_flag("--json", lat->json, "Print one JSON object");
  return [=]() { return RunLatency(*lat); };
}

}  // namespace pagellm::cli
