// MatMul dispatcher: picks the ISA kernels, quantizes activations for Q8_0/Q4_0 weights, and
// splits the work over the thread pool. The split never affects results (see matmul.h): every
// kernel computes each output with a sequence fixed by (row, token, cols) alone.
#include "kernels/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "kernels/matmul_internal.h"
#include "pagellm/check.h"

namespace pagellm {

using kernels_internal::MatMulArgs;
using kernels_internal::MatMulBlockFn;
using kernels_internal::PrepareQuantActsFn;

namespace {

// Below this many multiply-adds a pool dispatch (a few microseconds) costs more than it saves.
constexpr int64_t kMinParallelMacs = int64_t{1} << 18;
// Activation bytes per token block: a block stays in L2 (1 MiB on Zen 4/5) while every row
// tile of the thread's range streams over it.
constexpr int64_t kTokenBlockBytes = 512 << 10;
// Thread row ranges are multiples of this many row tiles.
constexpr int64_t kRowTilesPerSplit = 4;

struct Plan {
  MatMulBlockFn block = nullptr;
  PrepareQuantActsFn prepare = nullptr;  // null for float weights
  int row_tile = 1;
  int token_tile = 1;
};

bool LevelSupported(SimdLevel level) {
  const CpuFeatures& f = GetCpuFeatures();
  switch (level) {
    case SimdLevel::kScalar: return true;
    case SimdLevel::kAvx2: return f.avx2;
    case SimdLevel::kAvx512: return f.avx512 && f.avx2;
  }
  return false;
}

Plan MakePlan(SimdLevel level, bool quant) {
  namespace ki = kernels_internal;
  if (level == SimdLevel::kAvx512) {
    if (!quant) {
      return {ki::avx512::MatMulFloatBlock, nullptr, ki::kAvx512FloatRowTile,
              ki::kAvx512FloatTokenTile};
    }
    if (GetCpuFeatures().avx512_vnni) {
      return {ki::avx512::MatMulQuantBlock, ki::avx512::PrepareQuantActs,
              ki::kAvx512QuantRowTile, ki::kAvx512QuantTokenTile};
    }
    level = SimdLevel::kAvx2;  // no vpdpbusd: the AVX2 quant kernels give identical results
  }
  if (level == SimdLevel::kAvx2) {
    if (!quant) {
      return {ki::avx2::MatMulFloatBlock, nullptr, ki::kAvx2FloatRowTile, ki::kAvx2FloatTokenTile};
    }
    return {ki::avx2::MatMulQuantBlock, ki::avx2::PrepareQuantActs, ki::kAvx2QuantRowTile,
            ki::kAvx2QuantTokenTile};
  }
  if (!quant) {
    return {ki::scalar::MatMulFloatBlock, nullptr, ki::kScalarRowTile, ki::kScalarTokenTile};
  }
  return {ki::scalar::MatMulQuantBlock, ki::scalar::PrepareQuantActs, ki::kScalarRowTile,
          ki::kScalarTokenTile};
}

// Per-calling-thread scratch for quantized activations; grows, never shrinks, 64-byte aligned.
uint8_t* ActivationScratch(int64_t bytes) {
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<uint8_t, FreeDeleter> buf;
  thread_local int64_t capacity = 0;
  if (bytes > capacity) {
    const int64_t want = std::max<int64_t>(bytes + bytes / 4, 64 << 10);
    const int64_t rounded = (want + 63) / 64 * 64;
    buf.reset(static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>(rounded))));
    CHECK(buf != nullptr) << "out of memory for " << rounded << " bytes of activations";
    capacity = rounded;
  }
  return buf.get();
}

}  // namespace

bool IsMatMulWeightType(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8_0 ||
         t == DType::kQ4_0;
}

void MatMulAtLevel(SimdLevel level, const WeightMatrix& w, const float* x, int64_t n_tokens,
                   float* y, ThreadPool* pool) {
  CHECK(IsMatMulWeightType(w.dtype)) << "MatMul weight type " << DTypeName(w.dtype);
  CHECK(LevelSupported(level)) << "CPU lacks SIMD level " << SimdLevelName(level);
  CHECK_GE(n_tokens, 0);
  if (n_tokens == 0 || w.rows == 0) return;
  CHECK_GT(w.cols, 0);
  CHECK(w.data != nullptr && x != nullptr && y != nullptr);
  const bool quant = w.dtype == DType::kQ8_0 || w.dtype == DType::kQ4_0;
  if (quant) CHECK_EQ(w.cols % 32, 0) << "quantized rows are whole blocks of 32";

  const Plan plan = MakePlan(level, quant);
  MatMulArgs args;
  args.w = &w;
  args.x = x;
  args.y = y;

  int threads = pool != nullptr ? pool->num_threads() : 1;
  if (w.rows * w.cols * n_tokens < kMinParallelMacs) threads = 1;

  int64_t act_bytes_per_token = w.cols * static_cast<int64_t>(sizeof(float));
  if (quant) {
    act_bytes_per_token = kernels_internal::QuantActsBytes(w.cols);
    uint8_t* qx = ActivationScratch(n_tokens * act_bytes_per_token);
    auto prepare = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        plan.prepare(w.dtype, x + t * w.cols, w.cols, qx + t * act_bytes_per_token);
      }
    };
    if (threads > 1 && n_tokens >= 2 * threads) {
      pool->ParallelFor(n_tokens, 1, prepare);
    } else {
      prepare(0, n_tokens);
    }
    args.qx = qx;
  }

  // Contiguous row ranges, one per thread, aligned to whole row tiles.
  const int64_t align = plan.row_tile * kRowTilesPerSplit;
  const int64_t units = (w.rows + align - 1) / align;
  threads = static_cast<int>(std::min<int64_t>(threads, units));
  const int64_t rows_per_thread = (units + threads - 1) / threads * align;
  // Token blocks sized to stay in L2, whole token tiles.
  const int64_t tt = plan.token_tile;
  const int64_t block_tokens =
      std::max<int64_t>(tt, kTokenBlockBytes / act_bytes_per_token / tt * tt);

  auto run = [&](int64_t task, int) {
    const int64_t r0 = task * rows_per_thread;
    const int64_t r1 = std::min(w.rows, r0 + rows_per_thread);
    if (r0 >= r1) return;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += block_tokens) {
      plan.block(args, r0, r1, t0, std::min(n_tokens, t0 + block_tokens));
    }
  };
  if (threads > 1) {
    pool->Run(threads, run);
  } else {
    run(0, 0);
  }
}

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool) {
  MatMulAtLevel(ActiveSimdLevel(), w, x, n_tokens, y, pool);
}

}  // namespace pagellm
