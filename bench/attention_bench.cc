// Prefill attention over a paged KV cache: `tokens` new query tokens of one sequence at depth
// `depth` (positions [depth, depth + tokens), causal), Llama-3.2-1B attention shape (32 query
// heads, 8 KV heads, head_dim 64), block size 16 with blocks in shuffled order, every KV dtype
// the engine stores.
//
//   attention/<dtype>/depth<D>/tokens<T>/t<threads>   tokens/s of one layer's attention and
//       GFLOP/s (4 x heads x head_dim per (query, visible position): QK^T and PV).
//   attention/qwen1.5b/f16/...   the same with Qwen2.5-1.5B's attention shape (12 query heads,
//       2 KV heads, head_dim 128: six query heads per KV head).
//   decode/<dtype>/depth<D>/t<threads>   one decode token at depth D through the attention of
//       16 layers, each with its own cache (a Llama-3.2-1B step's KV reads: 128 MiB of 16-bit
//       rows at depth 4096, far beyond the caches): ms per token and the KV bytes read per
//       second.
//
// Run: build/bench/attention_bench --benchmark_filter=<regex>; PAGELLM_SIMD=scalar caps the
// SIMD level.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "base/huge_page_buffer.h"
#include "base/thread_pool.h"
#include "kernels/kv_quant.h"
#include "kernels/paged_attention.h"

namespace pagellm {
namespace {

constexpr int kBlockSize = 16;

// Attention shapes: query heads, KV heads, head_dim.
struct Shape {
  const char* name;
  int heads, kv_heads, head_dim;
};
constexpr Shape kLlama1B = {"", 32, 8, 64};            // Llama-3.2-1B: group 4
constexpr Shape kQwen15B = {"qwen1.5b/", 12, 2, 128};  // Qwen2.5-1.5B: group 6

struct Case {
  AttentionShape shape;
  KvCacheDtype dtype;
  std::vector<uint8_t> k, v;
  std::vector<int32_t> table;
  std::vector<float> q, out;
  std::vector<SequenceChunk> seqs;
  KvLayerView view;
};

Case MakeCase(KvCacheDtype dtype, int depth, int tokens, const Shape& shape = kLlama1B) {
  const int kHeads = shape.heads, kKvHeads = shape.kv_heads, kHeadDim = shape.head_dim;
  Case c;
  c.dtype = dtype;
  c.shape.num_heads = kHeads;
  c.shape.num_kv_heads = kKvHeads;
  c.shape.head_dim = kHeadDim;
  c.shape.block_size = kBlockSize;
  c.shape.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const int positions = depth + tokens;
  const int blocks = (positions + kBlockSize - 1) / kBlockSize;
  c.table.resize(blocks);
  std::iota(c.table.begin(), c.table.end(), 1);
  std::mt19937 rng(7);
  std::shuffle(c.table.begin(), c.table.end(), rng);
  const int row_bytes = KvRowBytes(dtype, kHeadDim);
  const size_t rows = static_cast<size_t>(blocks + 1) * kBlockSize * kKvHeads;
  c.k.assign(rows * row_bytes, 0);
  c.v.assign(rows * row_bytes, 0);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(kHeadDim);
  for (size_t r = 0; r < rows; ++r) {
    for (float& e : x) e = nd(rng);
    QuantizeKvRow(dtype, x.data(), kHeadDim, 1.0f, c.k.data() + r * row_bytes);
    for (float& e : x) e = nd(rng);
    QuantizeKvRow(dtype, x.data(), kHeadDim, 1.0f, c.v.data() + r * row_bytes);
  }
  c.q.resize(static_cast<size_t>(tokens) * kHeads * kHeadDim);
  for (float& e : c.q) e = nd(rng);
  c.out.resize(c.q.size());
  c.seqs.push_back({tokens, depth, c.table, false});
  c.view.dtype = CanonicalKvStorageDtype(dtype);
  c.view.k = c.k.data();
  c.view.v = c.v.data();
  c.view.row_bytes = row_bytes;
  c.view.rotated = KvRowsRotated(dtype, kHeadDim);
  return c;
}

void BM_PrefillAttention(benchmark::State& state, KvCacheDtype dtype, int depth, int tokens,
                         int threads, const Shape& shape) {
  Case c = MakeCase(dtype, depth, tokens, shape);
  ThreadPool pool(threads);
  // Warm-up: the kernel's task lists and chunk partials grow once and are reused, as in the
  // engine; the timed calls must not pay their first allocation.
  PagedAttention(c.shape, c.q.data(), c.view, c.seqs, c.out.data(), &pool);
  for (auto _ : state) {
    PagedAttention(c.shape, c.q.data(), c.view, c.seqs, c.out.data(), &pool);
    benchmark::DoNotOptimize(c.out.data());
  }
  // Visible positions summed over the query tokens: depth + 1 .. depth + tokens.
  const double visible = double(tokens) * depth + double(tokens) * (tokens + 1) / 2;
  state.counters["tok/s"] =
      benchmark::Counter(double(tokens) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(4.0 * shape.heads * shape.head_dim * visible * state.iterations() / 1e9,
                         benchmark::Counter::kIsRate);
}

void BM_DecodeAttention(benchmark::State& state, KvCacheDtype dtype, int depth, int threads,
                        bool huge_pages) {
  constexpr int kLayers = 16;
  std::vector<Case> layers;
  std::vector<HugePageBuffer> huge;
  for (int l = 0; l < kLayers; ++l) {
    layers.push_back(MakeCase(dtype, depth, 1));
    if (!huge_pages) continue;
    // The same rows on 2 MiB pages (the engine's KV cache mapping, kv/kv_cache_storage.cc).
    Case& c = layers.back();
    for (std::vector<uint8_t>* rows : {&c.k, &c.v}) {
      huge.emplace_back(rows->size());
      std::copy(rows->begin(), rows->end(), huge.back().data());
    }
    c.view.k = huge[huge.size() - 2].data();
    c.view.v = huge.back().data();
  }
  ThreadPool pool(threads);
  for (Case& c : layers) PagedAttention(c.shape, c.q.data(), c.view, c.seqs, c.out.data(), &pool);
  for (auto _ : state) {
    for (Case& c : layers) {
      PagedAttention(c.shape, c.q.data(), c.view, c.seqs, c.out.data(), &pool);
      benchmark::DoNotOptimize(c.out.data());
    }
  }
  const double kv_bytes =
      2.0 * kLayers * (depth + 1) * kLlama1B.kv_heads * layers[0].view.row_bytes;
  state.counters["KV GB/s"] =
      benchmark::Counter(kv_bytes * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void Register() {
  const std::pair<KvCacheDtype, const char*> dtypes[] = {{KvCacheDtype::kFloat16, "f16"},
                                                         {KvCacheDtype::kBFloat16, "bf16"},
                                                         {KvCacheDtype::kFloat32, "f32"},
                                                         {KvCacheDtype::kInt8, "int8"},
                                                         {KvCacheDtype::kFp8E4m3, "fp8"}};
  for (const Shape* shape : {&kLlama1B, &kQwen15B})
    for (const auto& [dtype, name] : dtypes) {
      // The second shape (its own head_dim and group size) with the engine's default cache.
      if (shape != &kLlama1B && dtype != KvCacheDtype::kFloat16) continue;
      for (int depth : {0, 4096, 16384})
        for (int threads : {1, 2}) {
          const int tokens = depth == 16384 ? 128 : 512;
          benchmark::RegisterBenchmark(
              ("attention/" + std::string(shape->name) + name + "/depth" + std::to_string(depth) +
               "/tokens" + std::to_string(tokens) + "/t" + std::to_string(threads))
                  .c_str(),
              [=](benchmark::State& s) {
                BM_PrefillAttention(s, dtype, depth, tokens, threads, *shape);
              })
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
        }
    }
  for (const auto& [dtype, name] : dtypes)
    for (int depth : {4096, 16384})
      for (int threads : {1, 2})
        for (bool huge_pages : {false, true})
          benchmark::RegisterBenchmark(
              ("decode/" + std::string(name) + "/depth" + std::to_string(depth) + "/t" +
               std::to_string(threads) + (huge_pages ? "/huge" : "/4k"))
                  .c_str(),
              [=](benchmark::State& s) {
                BM_DecodeAttention(s, dtype, depth, threads, huge_pages);
              })
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
}

}  // namespace
}  // namespace pagellm

int main(int argc, char** argv) {
  pagellm::Register();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
