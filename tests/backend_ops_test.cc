// Backend-ops harness: random ragged ForwardBatches through a backend under test and a reference
// backend, logits compared by normalised mean squared error (NMSE = Σ(a - b)² / Σb²). It is the
// gate for a new weight format, KV format or backend (add a BackendUnderTest): the CPU backend at
// the active SIMD level is checked against the same backend pinned to the scalar kernels.
//
// Each case is a small random-weight model (written in-test as GGUF), a KV format and a block
// size. Sequences get random non-contiguous block tables; both KV caches start NaN-poisoned, so
// a kernel reading a slot no token wrote turns the logits non-finite. Steps mix prefill chunks
// of random length with decode tokens and multi-token (verification-like) runs, with random
// all_logits.
//
// Perf mode: PAGELLM_BACKEND_OPS_PERF=1 also runs a larger model and prints, per case and
// backend, the time of the whole schedule and tokens per second.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "base/cpu_features.h"
#include "base/kv_cache_dtype.h"
#include "base/thread_pool.h"
#include "fmt/format.h"
#include "model/model_weights.h"
#include "model/test_file_writers.h"

namespace pagellm {
namespace {

using testing::TinyModelSpec;

struct BackendUnderTest {
  std::string name;
  BackendOptions options;
};

struct OpsCase {
  std::string name;
  TinyModelSpec model;
  KvCacheDtype kv_dtype = KvCacheDtype::kFloat32;
  int block_size = 16;
  double max_nmse = 1e-6;
};

// One sequence of a schedule: its tokens, how many are in the cache, and its blocks.
struct ScheduledSeq {
  std::vector<int32_t> tokens;
  int32_t prompt_len = 0;
  int32_t computed = 0;
  std::vector<int32_t> block_table;
};

// Appends the next n tokens of s to batch (its whole block table) and advances s.
void AppendChunk(ScheduledSeq* s, int32_t n, bool all_logits, ForwardBatch* batch) {
  SequenceChunk chunk;
  chunk.num_tokens = n;
  chunk.start_pos = s->computed;
  chunk.block_table = s->block_table;
  chunk.all_logits = all_logits;
  batch->seqs.push_back(chunk);
  batch->token_ids.insert(batch->token_ids.end(), s->tokens.begin() + s->computed,
                          s->tokens.begin() + s->computed + n);
  s->computed += n;
}

// A random schedule: each step takes a random subset of the unfinished sequences, each with a
// prefill chunk (1..12 tokens) or 1..4 generated tokens; tokens are random ids.
std::vector<ForwardBatch> RandomSchedule(const OpsCase& c, int num_blocks, uint32_t seed,
                                         std::vector<ScheduledSeq>* seqs) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int num_seqs = 5;
  const int max_len = c.model.context;
  // Blocks 1..num_blocks-1 shuffled, then handed out in turn: tables are non-contiguous.
  std::vector<int32_t> free_blocks(num_blocks - 1);
  for (int b = 0; b < num_blocks - 1; ++b) free_blocks[b] = b + 1;
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  size_t next_block = 0;
  seqs->resize(num_seqs);
  for (ScheduledSeq& s : *seqs) {
    const int len = uniform(max_len / 4, max_len);
    s.prompt_len = uniform(1, len - 1);
    for (int i = 0; i < len; ++i) s.tokens.push_back(uniform(0, c.model.vocab - 1));
    const int blocks = (len + c.block_size - 1) / c.block_size;
    for (int b = 0; b < blocks; ++b) s.block_table.push_back(free_blocks.at(next_block++));
  }
  std::vector<ForwardBatch> steps;
  for (bool work = true; work;) {
    work = false;
    ForwardBatch batch;
    for (ScheduledSeq& s : *seqs) {
      const int32_t len = static_cast<int32_t>(s.tokens.size());
      if (s.computed >= len || uniform(0, 9) < 3) {
        work |= s.computed < len;
        continue;
      }
      const int32_t n = s.computed < s.prompt_len
                            ? std::min(uniform(1, 12), s.prompt_len - s.computed)
                            : std::min(uniform(1, 4), len - s.computed);
      AppendChunk(&s, n, uniform(0, 9) < 3, &batch);
      work = true;
    }
    if (!batch.seqs.empty()) steps.push_back(std::move(batch));
  }
  return steps;
}

// A long-context schedule: one sequence prefills `depth` tokens in chunks of 1024 (the last one
// shorter), then decodes 3 single tokens and one 5-token run (a speculative verification); a
// second, short sequence shares every step so that the batch is ragged. Logits only for the last
// token of each chunk, except the verification run (all its rows). Block tables are shuffled as
// in RandomSchedule, so the long sequence's blocks are scattered over the poisoned pool.
std::vector<ForwardBatch> LongSchedule(const OpsCase& c, int depth, int num_blocks, uint32_t seed,
                                       std::vector<ScheduledSeq>* seqs) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<int32_t> free_blocks(num_blocks - 1);
  for (int b = 0; b < num_blocks - 1; ++b) free_blocks[b] = b + 1;
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  size_t next_block = 0;
  seqs->resize(2);
  const int lengths[2] = {depth + 3 + 5, 48};
  const int prompts[2] = {depth, 40};
  for (int i = 0; i < 2; ++i) {
    ScheduledSeq& s = (*seqs)[i];
    s.prompt_len = prompts[i];
    for (int t = 0; t < lengths[i]; ++t) s.tokens.push_back(uniform(0, c.model.vocab - 1));
    const int blocks = (lengths[i] + c.block_size - 1) / c.block_size;
    for (int b = 0; b < blocks; ++b) s.block_table.push_back(free_blocks.at(next_block++));
  }
  std::vector<ForwardBatch> steps;
  for (bool work = true; work;) {
    work = false;
    ForwardBatch batch;
    for (ScheduledSeq& s : *seqs) {
      const int32_t len = static_cast<int32_t>(s.tokens.size());
      if (s.computed >= len) continue;
      int32_t n;
      bool verify = false;
      if (s.computed < s.prompt_len) {
        n = std::min(1024, s.prompt_len - s.computed);
      } else if (len - s.computed > 5) {
        n = 1;
      } else {
        n = len - s.computed;
        verify = true;
      }
      AppendChunk(&s, n, verify, &batch);
      work = true;
    }
    if (!batch.seqs.empty()) steps.push_back(std::move(batch));
  }
  return steps;
}

double Nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    err += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  return norm > 0 ? err / norm : err;
}

bool PerfMode() {
  const char* env = std::getenv("PAGELLM_BACKEND_OPS_PERF");
  return env != nullptr && std::string(env) != "0";
}

class BackendOpsTest : public ::testing::Test {
 protected:
  std::unique_ptr<LoadedModel> WriteAndLoad(const TinyModelSpec& spec) {
    const std::string path = dir_.Write("model.gguf", testing::TinyGguf(spec).Build());
    auto m = LoadModel(path);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(*m) : nullptr;
  }

  // Runs the case's schedule on `backend` (a fresh, poisoned cache) and returns each step's
  // logits; *seconds gets the time spent in Forward.
  std::vector<ForwardOutput> Run(const OpsCase& c, const LoadedModel& model,
                                 const BackendUnderTest& b, const std::vector<ForwardBatch>& steps,
                                 int num_blocks, double* seconds) {
    std::vector<ForwardOutput> outs;
    auto backend = CreateBackend(model, b.options);
    EXPECT_TRUE(backend.ok()) << backend.status().ToString();
    if (!backend.ok()) return outs;
    KvCacheShape shape;
    shape.num_layers = model.config.num_layers;
    shape.num_kv_heads = model.config.num_kv_heads;
    shape.head_dim = model.config.head_dim;
    shape.block_size = c.block_size;
    shape.num_blocks = num_blocks;
    shape.dtype = c.kv_dtype;
    Status st = (*backend)->AllocateKvCache(shape, /*num_swap_blocks=*/0);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) return outs;
    (*backend)->PoisonKvCache();
    *seconds = 0;
    for (const ForwardBatch& batch : steps) {
      ForwardOutput out;
      const auto t0 = std::chrono::steady_clock::now();
      st = (*backend)->Forward(batch, &out);
      *seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_TRUE(st.ok()) << st.ToString();
      outs.push_back(std::move(out));
    }
    return outs;
  }

  // Every step of every case: same rows, all finite, NMSE within the case's bound.
  // depth 0: RandomSchedule; otherwise LongSchedule to that depth.
  void CheckCases(const std::vector<OpsCase>& cases, const BackendUnderTest& test,
                  const BackendUnderTest& reference, uint32_t seeds, int depth = 0) {
    for (const OpsCase& c : cases) {
      std::unique_ptr<LoadedModel> model = WriteAndLoad(c.model);
      ASSERT_NE(model, nullptr) << c.name;
      for (uint32_t seed = 1; seed <= seeds; ++seed) {
        const std::string what = fmt::format("{} (seed {})", c.name, seed);
        std::vector<ScheduledSeq> seqs;
        const int num_blocks = 5 * ((c.model.context + c.block_size - 1) / c.block_size) + 3;
        const std::vector<ForwardBatch> steps =
            depth > 0 ? LongSchedule(c, depth, num_blocks, seed, &seqs)
                      : RandomSchedule(c, num_blocks, seed, &seqs);
        int64_t tokens = 0;
        for (const ForwardBatch& b : steps) tokens += static_cast<int64_t>(b.token_ids.size());
        double test_s = 0, ref_s = 0;
        const std::vector<ForwardOutput> got = Run(c, *model, test, steps, num_blocks, &test_s);
        const std::vector<ForwardOutput> want =
            Run(c, *model, reference, steps, num_blocks, &ref_s);
        ASSERT_EQ(got.size(), steps.size()) << what;
        ASSERT_EQ(want.size(), steps.size()) << what;
        double worst = 0;
        for (size_t i = 0; i < steps.size(); ++i) {
          ASSERT_EQ(got[i].row_offset, want[i].row_offset) << what << " step " << i;
          ASSERT_EQ(got[i].logits.size(), want[i].logits.size()) << what << " step " << i;
          for (float v : got[i].logits) ASSERT_TRUE(std::isfinite(v)) << what << " step " << i;
          for (float v : want[i].logits) ASSERT_TRUE(std::isfinite(v)) << what << " step " << i;
          const double e = Nmse(got[i].logits, want[i].logits);
          worst = std::max(worst, e);
          EXPECT_LE(e, c.max_nmse)
              << what << " step " << i << ": " << test.name << " vs " << reference.name;
        }
        if (PerfMode() || seed == 1) {
          fmt::print(
              "{:<28} {:3} steps {:5} tokens  max NMSE {:.2e}  {} {:8.2f} ms ({:.0f} tok/s)  "
              "{} {:8.2f} ms\n",
              what, steps.size(), tokens, worst, test.name, test_s * 1e3,
              tokens / std::max(test_s, 1e-9), reference.name, ref_s * 1e3);
        }
      }
    }
  }

  testing::TempDir dir_;
  ThreadPool pool_{2};
};

TinyModelSpec SmallModel(bool qwen2, uint32_t matrix_type, bool tied) {
  TinyModelSpec s;
  s.hidden = 64;
  s.intermediate = 128;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.vocab = 96;
  s.context = 64;
  s.tied = tied;
  s.attention_bias = qwen2;
  s.matrix_type = matrix_type;
  return s;
}

std::vector<OpsCase> Cases(const TinyModelSpec& llama, const TinyModelSpec& qwen2) {
  std::vector<OpsCase> cases;
  const struct {
    KvCacheDtype dtype;
    double max_nmse;  // quantised KV rounds the (level-dependent) K/V differently at times
  } kv_formats[] = {{KvCacheDtype::kFloat32, 1e-9},
                    {KvCacheDtype::kBFloat16, 1e-6},
                    {KvCacheDtype::kFp8E4m3, 1e-4},
                    {KvCacheDtype::kInt8, 1e-4},
                    {KvCacheDtype::kInt4, 1e-3}};
  for (const auto& kv : kv_formats) {
    for (int block_size : {4, 16}) {
      for (const TinyModelSpec* m : {&llama, &qwen2}) {
        OpsCase c;
        c.name = fmt::format("{} kv={} bs={}", m->attention_bias ? "qwen2" : "llama",
                             KvCacheDtypeName(kv.dtype), block_size);
        c.model = *m;
        c.kv_dtype = kv.dtype;
        c.block_size = block_size;
        c.max_nmse = kv.max_nmse;
        cases.push_back(c);
      }
    }
  }
  return cases;
}

// The CPU backend at the active SIMD level against the scalar reference kernels.
TEST_F(BackendOpsTest, ActiveSimdLevelMatchesScalarReference) {
  BackendUnderTest test{SimdLevelName(ActiveSimdLevel()), BackendOptions(&pool_, 64)};
  BackendUnderTest reference{"scalar", BackendOptions(&pool_, 64)};
  reference.options.cpu_simd_level = SimdLevel::kScalar;
  CheckCases(
      Cases(SmallModel(false, testing::kGgmlF32, true), SmallModel(true, testing::kGgmlF16, false)),
      test, reference, /*seeds=*/3);
}

// The two runs of one backend on one schedule are bitwise identical (no state leaks between
// backends or steps), whatever the thread count.
TEST_F(BackendOpsTest, SameBackendIsBitwiseDeterministic) {
  ThreadPool one(1);
  BackendUnderTest a{"pool2", BackendOptions(&pool_, 64)};
  BackendUnderTest b{"pool1", BackendOptions(&one, 64)};
  OpsCase c;
  c.name = "llama kv=float32 bs=4";
  c.model = SmallModel(false, testing::kGgmlF32, true);
  c.block_size = 4;
  std::unique_ptr<LoadedModel> model = WriteAndLoad(c.model);
  ASSERT_NE(model, nullptr);
  std::vector<ScheduledSeq> seqs;
  const int num_blocks = 5 * (c.model.context / c.block_size) + 3;
  const std::vector<ForwardBatch> steps = RandomSchedule(c, num_blocks, 7, &seqs);
  double s = 0;
  const std::vector<ForwardOutput> x = Run(c, *model, a, steps, num_blocks, &s);
  const std::vector<ForwardOutput> y = Run(c, *model, b, steps, num_blocks, &s);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i].logits, y[i].logits) << "step " << i;
}

// The attention kernels at long context (prefill chunks of 1024 at depths up to 16K, decode and
// a verification run at the end) against the scalar reference, for every KV dtype, on a pool
// that starts NaN-poisoned and hands out scattered blocks: the tiled prefill and the split
// decode paths must never read a slot no token wrote. One layer, 2 query heads over 1 KV head
// (GQA), head_dim 32, so that the scalar reference's O(depth^2) prefill stays short (16K for the
// 16-bit cache, the long-context default; 2-4K for the others, whose scalar decoders are slow).
TEST_F(BackendOpsTest, LongContextAttentionMatchesScalarReference) {
  TinyModelSpec m = SmallModel(false, testing::kGgmlF32, true);
  m.layers = 1;
  m.heads = 2;
  m.kv_heads = 1;
  m.head_dim = 32;
  BackendUnderTest reference{"scalar", BackendOptions(&pool_, 64)};
  reference.options.cpu_simd_level = SimdLevel::kScalar;
  const struct {
    int depth;
    KvCacheDtype dtype;
    double max_nmse;
  } runs[] = {{4096, KvCacheDtype::kFloat32, 1e-8},
              {2048, KvCacheDtype::kFp8E4m3, 1e-4},
              {4096, KvCacheDtype::kInt4, 1e-3},
              {4096, KvCacheDtype::kInt8, 1e-4},
              {16384, KvCacheDtype::kBFloat16, 1e-5}};
  for (const auto& r : runs) {
    m.context = r.depth + 64;
    BackendUnderTest test{SimdLevelName(ActiveSimdLevel()), BackendOptions(&pool_, m.context)};
    reference.options = BackendOptions(&pool_, m.context);
    reference.options.cpu_simd_level = SimdLevel::kScalar;
    OpsCase c;
    c.name = fmt::format("long kv={} depth={}", KvCacheDtypeName(r.dtype), r.depth);
    c.model = m;
    c.kv_dtype = r.dtype;
    c.block_size = 16;
    c.max_nmse = r.max_nmse;
    CheckCases({c}, test, reference, /*seeds=*/1, r.depth);
  }
}

// Perf mode only: a larger model (float32 and int8 KV, block size 16), so the times mean
// something; the scalar reference makes it take a minute or two.
TEST_F(BackendOpsTest, PerfLargerModel) {
  if (!PerfMode()) GTEST_SKIP() << "set PAGELLM_BACKEND_OPS_PERF=1";
  TinyModelSpec m = SmallModel(false, testing::kGgmlF32, true);
  m.hidden = 256;
  m.intermediate = 704;
  m.layers = 2;
  m.heads = 8;
  m.kv_heads = 4;
  m.head_dim = 32;
  m.vocab = 1024;
  m.context = 128;
  TinyModelSpec q = m;
  q.attention_bias = true;
  q.matrix_type = testing::kGgmlF16;
  BackendUnderTest test{SimdLevelName(ActiveSimdLevel()), BackendOptions(&pool_, m.context)};
  BackendUnderTest reference{"scalar", BackendOptions(&pool_, m.context)};
  reference.options.cpu_simd_level = SimdLevel::kScalar;
  std::vector<OpsCase> cases;
  for (const OpsCase& c : Cases(m, q)) {
    if (c.block_size == 16 &&
        (c.kv_dtype == KvCacheDtype::kFloat32 || c.kv_dtype == KvCacheDtype::kInt8)) {
      cases.push_back(c);
      cases.back().max_nmse *= 10;  // longer sequences accumulate more rounding
    }
  }
  CheckCases(cases, test, reference, /*seeds=*/1);
}

}  // namespace
}  // namespace pagellm
