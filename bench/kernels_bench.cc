// MatMul benchmarks at Llama-3.2-1B shapes, for every weight type, 1 and 2 threads.
//
//   gemv/<type>/<rows>x<cols>/t<threads>/cold   decode, n_tokens = 1, GB/s of weights streamed.
//       "cold" cycles through enough copies of the matrix (>= 256 MiB) that every call reads its
//       weights from DRAM, as in a real decode step; "hot" reuses one copy (L2/L3 resident).
//   gemv/<type>/8192x2048/t<threads>/cold/n<tokens>   Q8_0/Q4_0/Q4_Z(128) with 4 or 16 tokens (the
//       weight-streaming path of speculative verification), GB/s of weights per call.
//   gemm/<type>/<rows>x<cols>/n<tokens>/t<threads>   prefill, GFLOP/s (2 * rows * cols * n).
//   quantize_acts/<Q8_K|Q8_32>/<cols>   one token's activations quantized for a decode MatMul
//       (Q8_K super-blocks for K-quants / IQ4_XS, 32-blocks for Q4_0 / Q8_0), ns per call: a
//       serial step between a decode step's MatMuls, while the other threads wait. AVX-512
//       quantizers when that level is active, else the scalar ones.
//
// Shapes (out x in): 512x2048 (hot: L2-resident, the compute limit of the decode kernels),
// 2048x2048 (q/o proj), 8192x2048 (gate/up), 2048x8192 (down), 128256x2048 (lm_head, gemv only).
// PAGELLM_SIMD=avx2|scalar caps the SIMD level. Q8_0/Q4_0/Q4_Z(128) and Q4_K/Q5_K/Q6_K/IQ4_XS
// weights are packed as the backend packs them at load (PAGELLM_PACKED_WEIGHTS=0: row-major).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/matmul_decode_internal.h"
#include "kernels/matmul_internal.h"
#include "kernels/packed_weights.h"
#include "kernels/quantize.h"

namespace pagellm {
namespace {

constexpr int64_t kColdBytes = int64_t{256} << 20;

// xorshift-based uniform values in [-scale, scale): fast enough for 262M-element matrices.
class FastRandom {
 public:
  explicit FastRandom(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  float Next(float scale) {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return (static_cast<float>(s_ >> 40) / 16777216.0f * 2.0f - 1.0f) * scale;
  }

 private:
  uint64_t s_;
};

// `copies` identical rows x cols matrices of `type`, back to back.
struct WeightSet {
  DType type;
  int64_t rows, cols;
  int64_t copies;
  std::unique_ptr<uint8_t[]> bytes;
  // Load-time packed copies, as the backend makes them (PAGELLM_PACKED_WEIGHTS=0: none).
  PackedWeights packed;
  WeightMatrix at(int64_t i) const {
    WeightMatrix w;
    w.dtype = type;
    w.rows = rows;
    w.cols = cols;
    w.data = bytes.get() + i * w.nbytes();
    return packed.Get(w);
  }
};

// One cached set at a time (the lm_head in F32 alone is 1 GiB).
const WeightSet& GetWeights(DType type, int64_t rows, int64_t cols, bool cold) {
  static std::unique_ptr<WeightSet> cached;
  const int64_t nbytes = rows * DTypeRowBytes(type, cols);
  const int64_t copies = cold ? std::max<int64_t>(1, (kColdBytes + nbytes - 1) / nbytes) : 1;
  if (cached && cached->type == type && cached->rows == rows && cached->cols == cols &&
      cached->copies == copies) {
    return *cached;
  }
  cached.reset();
  auto set = std::make_unique<WeightSet>();
  set->type = type;
  set->rows = rows;
  set->cols = cols;
  set->copies = copies;
  set->bytes = std::make_unique<uint8_t[]>(nbytes * copies);
  FastRandom rng(rows * 31 + cols);
  std::vector<float> row(cols);
  const int64_t row_bytes = DTypeRowBytes(type, cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = rng.Next(0.05f);
    QuantizeRow(type, row.data(), set->bytes.get() + r * row_bytes, cols);
  }
  for (int64_t c = 1; c < copies; ++c) {
    std::memcpy(set->bytes.get() + c * nbytes, set->bytes.get(), nbytes);
  }
  for (int64_t c = 0; c < copies; ++c) set->packed.Add(set->at(c));
  cached = std::move(set);
  return *cached;
}

ThreadPool* PoolFor(int threads) {
  static ThreadPool pool2(2);
  return threads == 1 ? nullptr : &pool2;
}

std::vector<float> RandomActivations(int64_t n) {
  FastRandom rng(n);
  std::vector<float> x(n);
  for (float& v : x) v = rng.Next(1.0f);
  return x;
}

void BM_Gemv(benchmark::State& state, DType type, int64_t rows, int64_t cols, int threads,
             bool cold, int64_t n = 1) {
  const WeightSet& ws = GetWeights(type, rows, cols, cold);
  const std::vector<float> x = RandomActivations(n * cols);
  std::vector<float> y(n * rows);
  ThreadPool* pool = PoolFor(threads);
  int64_t i = 0;
  for (auto _ : state) {
    MatMul(ws.at(i), x.data(), n, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
    i = i + 1 == ws.copies ? 0 : i + 1;
  }
  const double bytes = static_cast<double>(ws.at(0).nbytes());
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Gemm(benchmark::State& state, DType type, int64_t rows, int64_t cols, int64_t n,
             int threads) {
  const WeightSet& ws = GetWeights(type, rows, cols, /*cold=*/false);
  const std::vector<float> x = RandomActivations(n * cols);
  std::vector<float> y(n * rows);
  ThreadPool* pool = PoolFor(threads);
  for (auto _ : state) {
    MatMul(ws.at(0), x.data(), n, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 2.0 * static_cast<double>(rows) * cols * n;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_QuantizeActs(benchmark::State& state, bool q8k, int64_t cols) {
  namespace ki = kernels_internal;
  const bool avx512 = ActiveSimdLevel() == SimdLevel::kAvx512;
  const std::vector<float> x = RandomActivations(cols);
  const int64_t bytes = q8k ? ki::GetQ8KActsLayout(cols).bytes : ki::QuantActsBytes(cols);
  std::vector<uint8_t> out(static_cast<size_t>(bytes));
  auto prepare = q8k ? (avx512 ? ki::avx512::PrepareQ8KActs : ki::PrepareQ8KActs)
                     : (avx512 ? ki::avx512::PrepareQuantActs : ki::scalar::PrepareQuantActs);
  for (auto _ : state) {
    prepare(8, x.data(), cols, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}

void RegisterAll() {
  for (int64_t cols : {1536, 2048, 8192, 8960}) {
    for (bool q8k : {true, false}) {
      benchmark::RegisterBenchmark(
          ("quantize_acts/" + std::string(q8k ? "Q8_K/" : "Q8_32/") + std::to_string(cols)).c_str(),
          [=](benchmark::State& st) { BM_QuantizeActs(st, q8k, cols); })
          ->Unit(benchmark::kNanosecond);
    }
  }
  const DType types[] = {DType::kQ4_0, DType::kQ4_Z, DType::kQ4_Z128, DType::kQ8_0,
                         DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,    DType::kIQ4_XS,
                         DType::kBF16, DType::kF16,  DType::kF32};
  struct Shape {
    int64_t rows, cols;
    bool gemm;
  };
  const Shape shapes[] = {
      {512, 2048, false},  // hot: L2-resident per thread, the kernels' compute limit
      {2048, 2048, true},
      {8192, 2048, true},
      {2048, 8192, true},
      {128256, 2048, false}};
  for (DType t : types) {
    const std::string tn(DTypeName(t));
    for (const Shape& s : shapes) {
      const std::string sn = std::to_string(s.rows) + "x" + std::to_string(s.cols);
      for (int threads : {1, 2}) {
        const std::string th = "/t" + std::to_string(threads);
        for (bool cold : {true, false}) {
          if (!cold && s.rows > 2048) continue;  // hot only for the L2/L3-sized matrices
          benchmark::RegisterBenchmark(
              ("gemv/" + tn + "/" + sn + th + (cold ? "/cold" : "/hot")).c_str(),
              [=](benchmark::State& st) { BM_Gemv(st, t, s.rows, s.cols, threads, cold); })
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
        // Weight-streaming path of speculative verification (k + 1 <= 16 tokens), gate/up shape.
        if ((t == DType::kQ4_0 || t == DType::kQ4_Z || t == DType::kQ4_Z128 || t == DType::kQ8_0) &&
            s.rows == 8192) {
          for (int64_t n : {4, 16}) {
            benchmark::RegisterBenchmark(
                ("gemv/" + tn + "/" + sn + th + "/cold/n" + std::to_string(n)).c_str(),
                [=](benchmark::State& st) { BM_Gemv(st, t, s.rows, s.cols, threads, true, n); })
                ->Unit(benchmark::kMicrosecond)
                ->UseRealTime();
          }
        }
        if (!s.gemm) continue;
        for (int64_t n : {64, 512}) {
          benchmark::RegisterBenchmark(
              ("gemm/" + tn + "/" + sn + "/n" + std::to_string(n) + th).c_str(),
              [=](benchmark::State& st) { BM_Gemm(st, t, s.rows, s.cols, n, threads); })
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
        }
      }
    }
  }
}

}  // namespace
}  // namespace pagellm

int main(int argc, char** argv) {
  pagellm::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
