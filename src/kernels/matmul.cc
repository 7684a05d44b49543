// MatMul dispatcher: picks the ISA kernels of the weight format (weight_format.h), quantizes
// activations for the integer formats, and splits the work over the thread pool. The split never
// affects results (see matmul.h): every kernel computes each output with a sequence fixed by (row,
// token, cols) alone.
#include "kernels/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "base/stealing_ranges.h"
#include "kernels/kernel_tuning.h"
#include "kernels/matmul_decode_internal.h"
#include "kernels/matmul_internal.h"
#include "kernels/weight_format.h"
#include "pagellm/check.h"

namespace pagellm {

using kernels_internal::MatMulArgs;
using kernels_internal::MatMulBlockFn;
using kernels_internal::PrepareQuantActsFn;

namespace {

// Below this many multiply-adds a pool dispatch (a few microseconds) costs more than it saves.
constexpr int64_t kMinParallelMacs = int64_t{1} << 18;
// Activation bytes per token block. Weights are streamed once per token block, so blocks are
// as large as the kernels' cache blocking allows: the quantized kernels and the AVX2/scalar
// float kernels sweep a whole block per row group (keep it in L2, 1 MiB on Zen 4/5); the
// AVX-512 float kernel only keeps a chunk of each token tile in L1 and reads the block once per
// row block (L3 is fine), while every token block widens (F16/BF16) and packs each weight once
// more: 8 MiB = 1,024 tokens of K = 2,048, 256 of K = 8,192.
constexpr int64_t kTokenBlockBytes = 512 << 10;
constexpr int64_t kAvx512FloatTokenBlockBytes = 8 << 20;
// Task row ranges are multiples of this many row tiles (a unit).
constexpr int64_t kRowTilesPerSplit = 4;
// Calls with at most this many tokens (decode, speculative verification) stream weights from
// memory. Those of the decode-kernel formats give each thread a contiguous share of the units,
// and a thread whose share is done steals single units from the back of another's
// (StealingRanges): guided self-scheduling from one queue of shrinking tasks had restarted each
// thread's weight stream, and the K-quant kernels' software prefetch, at every task it took, 5-10
// times per call and thread.
constexpr int64_t kDecodeMaxTokens = 16;
// The other calls take guided self-scheduling: each task takes this share of the remaining rows
// per thread. (Equal tasks, 4 per thread, had been +8-12% over 2 per thread in batch-1 decode;
// 6 and 16 were no better than 4: a thread slowed for a moment must be able to hand its tail to
// the other, but every task start restarts a weight stream.) Prefill, bound by arithmetic, has
// no task under 1 / (kPrefillTasksPerThread * threads) of the rows: a short task repeats
// per-task work (weight panel packing, activation tile copies) on fewer rows (single-unit tails
// cost F16 pp512 ~2%).
constexpr int64_t kGuidedShare = 2;
constexpr int64_t kPrefillTasksPerThread = 4;
// Tasks are at least 1 / kMaxGuidedTasks of the units, so a call has at most this many (plus
// one per matrix where a cut falls at its end).
constexpr int64_t kMaxGuidedTasks = 512;

struct Plan {
  MatMulBlockFn block = nullptr;
  PrepareQuantActsFn prepare = nullptr;  // null for float weights
  int row_tile = 1;
  int token_tile = 1;
  int64_t token_block_bytes = kTokenBlockBytes;
};

bool LevelSupported(SimdLevel level) {
  const CpuFeatures& f = GetCpuFeatures();
  switch (level) {
    case SimdLevel::kScalar:
      return true;
    case SimdLevel::kAvx2:
      return f.avx2;
    case SimdLevel::kAvx512:
      return f.avx512 && f.avx2;
  }
  return false;
}

// The format's block kernel at `level` with its family's tiles, activation preparation and
// token blocking; resolved once per call.
Plan MakePlan(SimdLevel level, const WeightFormat& f) {
  namespace ki = kernels_internal;
  const bool quant = f.matmul == MatMulFamily::kInt8Dot;
  const bool decode = f.matmul == MatMulFamily::kInt8Decode;
  if ((quant || decode) && level == SimdLevel::kAvx512 && !GetCpuFeatures().avx512_vnni) {
    level = SimdLevel::kAvx2;  // no VNNI: the AVX2 integer kernels give identical results
  }
  CHECK(!quant || f.act_quant == ActQuant::kQ8Block32) << f.name;
  Plan p;
  p.block = f.kernels->block[static_cast<int>(level)];
  if (decode) {
    // The kernels loop over rows and tokens themselves; tasks start on 16-row groups at the
    // AVX-512 level, where Q4_K / Q5_K / Q6_K / IQ4_XS read a packed copy (kquant_packed.h).
    if (f.act_quant == ActQuant::kQ8Block256) {
      p.prepare = level == SimdLevel::kAvx512 ? ki::avx512::PrepareQ8KActs : ki::PrepareQ8KActs;
    } else {
      CHECK(f.act_quant == ActQuant::kQ8Block32) << f.name;
      p.prepare = level == SimdLevel::kAvx512 ? ki::avx512::PrepareQuantActs
                  : level == SimdLevel::kAvx2 ? ki::avx2::PrepareQuantActs
                                              : ki::scalar::PrepareQuantActs;
    }
    p.row_tile = level == SimdLevel::kAvx512 ? 16 : 4;
    p.token_tile = 1;
    return p;
  }
  switch (level) {
    case SimdLevel::kAvx512:
      if (!quant) {
        p.row_tile = ki::kAvx512FloatRowTile;
        p.token_tile = ki::kAvx512FloatTokenTile;
        p.token_block_bytes = kAvx512FloatTokenBlockBytes;
      } else {
        p.prepare = ki::avx512::PrepareQuantActs;
        p.row_tile = ki::kAvx512QuantRowTile;
        p.token_tile = ki::kAvx512QuantTokenTile;
      }
      break;
    case SimdLevel::kAvx2:
      p.prepare = quant ? ki::avx2::PrepareQuantActs : nullptr;
      p.row_tile = quant ? ki::kAvx2QuantRowTile : ki::kAvx2FloatRowTile;
      p.token_tile = quant ? ki::kAvx2QuantTokenTile : ki::kAvx2FloatTokenTile;
      break;
    case SimdLevel::kScalar:
      p.prepare = quant ? ki::scalar::PrepareQuantActs : nullptr;
      p.row_tile = ki::kScalarRowTile;
      p.token_tile = ki::kScalarTokenTile;
      break;
  }
  return p;
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

// Per-calling-thread scratch for activations gathered through a WeightMatrix::input_perm.
float* GatherScratch(int64_t floats) {
  struct FreeDeleter {
    void operator()(float* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<float, FreeDeleter> buf;
  thread_local int64_t capacity = 0;
  if (floats > capacity) {
    const int64_t want = std::max<int64_t>(floats + floats / 4, 16 << 10);
    const int64_t rounded = (want + 15) / 16 * 16;
    buf.reset(
        static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(rounded) * sizeof(float))));
    CHECK(buf != nullptr) << "out of memory for " << rounded << " gathered activations";
    capacity = rounded;
  }
  return buf.get();
}

}  // namespace

bool IsMatMulWeightType(DType t) {
  return GetWeightFormat(t).matmul != MatMulFamily::kNone;
}

namespace {

// A call's matrices cut into units of kRowTilesPerSplit row tiles of each one's kernel at
// `level`, numbered over the matrices in order.
struct UnitSplit {
  UnitSplit(SimdLevel level, const WeightMatrix* const* w, int count) : count(count) {
    begin[0] = 0;
    for (int i = 0; i < count; ++i) {
      rows[i] = w[i]->rows;
      align[i] = MakePlan(level, GetWeightFormat(w[i]->dtype)).row_tile * kRowTilesPerSplit;
      begin[i + 1] = begin[i] + (rows[i] + align[i] - 1) / align[i];
    }
  }
  int64_t units() const { return begin[count]; }
  // The matrix that unit u (< units()) belongs to.
  int MatrixOf(int64_t u) const {
    int m = 0;
    while (begin[m + 1] <= u) ++m;
    return m;
  }
  // The first row of matrix m's unit u (its row count for the unit after its last).
  int64_t Row(int m, int64_t u) const { return std::min(rows[m], (u - begin[m]) * align[m]); }

  int count;
  int64_t rows[kMaxMatMulOutputs];
  int64_t align[kMaxMatMulOutputs];
  int64_t begin[kMaxMatMulOutputs + 1];  // matrix i's first unit; begin[count]: the total
};

// Where the next call's threads start (see the decode split below), for its first two pool
// threads: the caller (thread 0) and a worker take shares `flip` and `flip + 1` (mod the
// shares). Decode only (prefill is bound by arithmetic), shares of the decode-kernel formats
// only, and only with the read-ahead tuned on.
ReadAhead DecodeReadAhead(SimdLevel level, const MatMulNext& next, int64_t n_tokens, int threads,
                          int64_t flip) {
  const int64_t bytes = GetKernelTuning().idle_read_ahead_bytes;
  if (next.count == 0 || bytes == 0 || n_tokens > kDecodeMaxTokens || threads < 2) return {};
  const UnitSplit split(level, next.w, next.count);
  const int parts = static_cast<int>(std::min<int64_t>(threads, split.units()));
  if (parts < 1) return {};
  int64_t range_bytes = bytes;
  // The first bytes of share s (StealingRanges' split; the packed layouts keep ~row_bytes a
  // row), or null where its matrix is not of the decode-kernel formats (K-quants, IQ4_XS,
  // Q4_1, Q5_0/1: F16 decode measured 1-3% slower with read-ahead, Zen 5, busy bus; packed Q4_0
  // groups 5-6% slower in quiet minutes). Ranges stay inside the share's matrix and rows.
  auto share_start = [&](int s) -> const void* {
    const int64_t u = StealingRanges::ShareBoundary(split.units(), parts, s);
    const int64_t u_end = StealingRanges::ShareBoundary(split.units(), parts, s + 1);
    const int m = split.MatrixOf(u);
    const WeightMatrix& w = *next.w[m];
    if (GetWeightFormat(w.dtype).matmul != MatMulFamily::kInt8Decode) return nullptr;
    const uint8_t* stream = w.packed != nullptr ? w.packed : w.data;
    const int64_t begin = split.Row(m, u) * w.row_bytes() / 64 * 64;
    const int64_t end = split.Row(m, std::min(u_end, split.begin[m + 1])) * w.row_bytes();
    if (stream == nullptr || begin >= end) return nullptr;
    range_bytes = std::min(range_bytes, end - begin);
    return stream + begin;
  };
  ReadAhead r;
  r.caller = share_start(static_cast<int>(flip % parts));
  if (parts > 1) r.worker = share_start(static_cast<int>((flip + 1) % parts));
  r.bytes = range_bytes;
  if (r.caller == nullptr && r.worker == nullptr) return {};
  return r;
}

// The matrices of outs share cols and input permutation; their dtypes may differ (llama.cpp's
// K-quant presets mix Q4_K and Q6_K within one layer's q/k/v). One pool dispatch serves them
// all, and activations are prepared once per distinct activation layout.
void MatMulManyAtLevel(SimdLevel level, const MatMulOutput* outs, int num_outs, const float* x,
                       int64_t n_tokens, ThreadPool* pool, const MatMulNext& next) {
  CHECK(LevelSupported(level)) << "CPU lacks SIMD level " << SimdLevelName(level);
  CHECK_GE(n_tokens, 0);
  CHECK(num_outs >= 1 && num_outs <= kMaxMatMulOutputs) << num_outs;
  const WeightMatrix& w0 = *outs[0].w;
  const int64_t cols = w0.cols;
  const WeightFormat* formats[kMaxMatMulOutputs];
  int64_t total_rows = 0;
  for (int i = 0; i < num_outs; ++i) {
    const WeightMatrix& w = *outs[i].w;
    formats[i] = &GetWeightFormat(w.dtype);
    CHECK(formats[i]->matmul != MatMulFamily::kNone) << "MatMul weight type " << formats[i]->name;
    CHECK(w.cols == cols && w.input_perm == w0.input_perm && w.input_cols == w0.input_cols)
        << "MatMulMany needs one width and input permutation";
    CHECK(w.rows == 0 || (w.data != nullptr && outs[i].y != nullptr));
    CHECK_EQ(cols % formats[i]->block_elems, 0)
        << "rows are whole blocks of " << formats[i]->block_elems;
    total_rows += w.rows;
  }
  if (n_tokens == 0 || total_rows == 0) return;
  CHECK_GT(cols, 0);
  CHECK(x != nullptr);

  // An input permutation (GPTQ act-order) is applied once: x'[t][j] = x[t][perm[j]], x being
  // [n_tokens][input_cols] when that is set.
  if (w0.input_perm != nullptr) {
    float* xp = GatherScratch(n_tokens * cols);
    const int32_t* perm = w0.input_perm;
    const int64_t x_cols = w0.input_cols > 0 ? w0.input_cols : cols;
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* src = x + t * x_cols;
      float* dst = xp + t * cols;
      for (int64_t j = 0; j < cols; ++j) dst[j] = src[perm[j]];
    }
    x = xp;
  }

  int threads = pool != nullptr ? pool->num_threads() : 1;
  if (total_rows * cols * n_tokens < kMinParallelMacs) threads = 1;

  // Per matrix: its plan and the bytes of one token's activations (floats, or the quantized
  // layout its kernels read). Matrices whose formats prepare activations alike share them.
  Plan plans[kMaxMatMulOutputs];
  int64_t act_bytes[kMaxMatMulOutputs];
  int64_t act_offset[kMaxMatMulOutputs];  // bytes into the scratch of its [n_tokens] rows
  bool writes_acts[kMaxMatMulOutputs];    // the first matrix of its layout prepares it
  int64_t quant_bytes = 0;                // all distinct quantized layouts, n_tokens rows each
  for (int i = 0; i < num_outs; ++i) {
    const WeightFormat& f = *formats[i];
    plans[i] = MakePlan(level, f);
    act_offset[i] = -1;
    writes_acts[i] = false;
    if (f.matmul == MatMulFamily::kFloat) {
      act_bytes[i] = cols * static_cast<int64_t>(sizeof(float));
      continue;
    }
    act_bytes[i] = f.act_quant == ActQuant::kQ8Block256
                       ? kernels_internal::GetQ8KActsLayout(cols).bytes
                       : kernels_internal::QuantActsBytes(cols);
    for (int j = 0; j < i; ++j) {
      if (act_offset[j] >= 0 && plans[j].prepare == plans[i].prepare &&
          formats[j]->act_code_offset == f.act_code_offset) {
        act_offset[i] = act_offset[j];
        break;
      }
    }
    if (act_offset[i] < 0) {
      act_offset[i] = quant_bytes;
      writes_acts[i] = true;
      quant_bytes += (n_tokens * act_bytes[i] + 63) / 64 * 64;
    }
  }
  MatMulArgs args[kMaxMatMulOutputs];
  for (int i = 0; i < num_outs; ++i) {
    args[i].w = outs[i].w;
    args[i].x = x;
    args[i].y = outs[i].y;
  }
  if (quant_bytes > 0) {
    // Each distinct layout is one region of [n_tokens][act_bytes] at its offset.
    uint8_t* qx = ActivationScratch(quant_bytes);
    auto prepare = [&](int64_t t0, int64_t t1) {
      for (int i = 0; i < num_outs; ++i) {
        if (!writes_acts[i]) continue;
        for (int64_t t = t0; t < t1; ++t) {
          plans[i].prepare(formats[i]->act_code_offset, x + t * cols, cols,
                           qx + act_offset[i] + t * act_bytes[i]);
        }
      }
    };
    if (threads > 1 && n_tokens >= 2 * threads) {
      pool->ParallelFor(n_tokens, 1, prepare);
    } else {
      prepare(0, n_tokens);
    }
    for (int i = 0; i < num_outs; ++i) {
      if (act_offset[i] >= 0) args[i].qx = qx + act_offset[i];
    }
  }

  // Token blocks as large as each kernel's cache blocking allows, whole token tiles.
  int64_t block_tokens[kMaxMatMulOutputs];
  for (int i = 0; i < num_outs; ++i) {
    const int64_t tt = plans[i].token_tile;
    block_tokens[i] = std::max<int64_t>(tt, plans[i].token_block_bytes / act_bytes[i] / tt * tt);
  }
  // Rows [r0, r1) of matrix m for every token; its kernel may prefetch on to prefetch_row_end.
  auto run_rows = [&](int m, int64_t r0, int64_t r1, int64_t prefetch_row_end) {
    MatMulArgs a = args[m];
    a.prefetch_row_end = prefetch_row_end;
    const int64_t bt = block_tokens[m];
    for (int64_t t0 = 0; t0 < n_tokens; t0 += bt) {
      plans[m].block(a, r0, r1, t0, std::min(n_tokens, t0 + bt));
    }
  };
  if (threads < 2) {
    for (int m = 0; m < num_outs; ++m) run_rows(m, 0, outs[m].w->rows, 0);
    return;
  }

  // Work is split in units of kRowTilesPerSplit row tiles of each matrix's kernel, numbered
  // over all matrices in order. Ranges never affect results: they depend only on the shapes,
  // formats and thread count, and each output is computed by one kernel call whatever its range.
  const WeightMatrix* mats[kMaxMatMulOutputs];
  for (int i = 0; i < num_outs; ++i) mats[i] = outs[i].w;
  const UnitSplit split(level, mats, num_outs);
  const int64_t units = split.units();

  // This thread's decode calls split into shares so far (see below).
  thread_local int64_t share_calls = 0;
  bool split_in_shares = n_tokens <= kDecodeMaxTokens && threads <= StealingRanges::kMaxParts;
  for (int i = 0; i < num_outs; ++i) {
    split_in_shares = split_in_shares && formats[i]->matmul == MatMulFamily::kInt8Decode;
  }
  if (split_in_shares) {
    // Decode of the decode-kernel formats (K-quants, IQ4_XS, Q4_1, Q5_0/1): thread shares, one
    // contiguous weight stream each (see kDecodeMaxTokens). The owner's kernel prefetches on to
    // the end of its share's rows of the matrix; a stolen unit is a stream of its own. (Q4_0,
    // Q8_0 and F16 decode keep the guided tasks below: Llama-3.2-1B Q4_0 measured 1.5% slower
    // with shares, median of 10 alternating rounds, Zen 5.)
    const int parts = static_cast<int>(std::min<int64_t>(threads, units));
    StealingRanges shares(units, parts);
    // Pool thread t owns share (t + flip) % parts: the owner of the last share, which ends at
    // the last matrix's end, takes share 0 of the next call, whose first matrix usually follows
    // in memory (PackedWeights keeps a decode step's order), so one thread's stream runs on
    // across the calls (with a fixed assignment none did: Llama-3.2-1B Q4_0 / Q8_0 decode, then
    // split this way too, measured 3-10% slower than with the guided tasks).
    const int64_t flip = share_calls++;
    auto run_unit = [&](int64_t u, bool owner, int64_t share_end) {
      const int m = split.MatrixOf(u);
      const int64_t prefetch_end =
          owner ? split.Row(m, std::min(share_end, split.begin[m + 1])) : 0;
      run_rows(m, split.Row(m, u), split.Row(m, u + 1), prefetch_end);
    };
    // Every body steals from every share once its own is done, so the units are all run
    // whichever threads run which bodies (a late worker may find nothing left).
    auto part_body = [&](int64_t, int thread) {
      const int p = static_cast<int>((thread + flip) % parts);
      int64_t u;
      if (thread < parts) {
        while (shares.ClaimFront(p, &u)) run_unit(u, true, shares.ShareEnd(p));
      }
      for (int i = 1; i <= parts; ++i) {
        while (shares.StealBack((p + i) % parts, &u)) run_unit(u, false, 0);
      }
    };
    pool->Run(parts, part_body, DecodeReadAhead(level, next, n_tokens, threads, share_calls));
    return;
  }

  // Prefill and the other formats' decode (or more threads than shares): contiguous row ranges cut
  // over all matrices together by guided self-scheduling: each task takes 1 / (kGuidedShare *
  // threads) of the units still unassigned (at least min_units, never across matrices). The pool
  // hands tasks out in order, so long streams come first and the last tasks are short: a thread
  // slowed down (by another VM on the memory bus, a preempted vCPU) leaves little to wait for at
  // the op's barrier.
  struct TaskRange {
    int m;
    int64_t r0, r1;
  };
  TaskRange task_ranges[kMaxGuidedTasks + kMaxMatMulOutputs];
  int64_t min_units = (units + kMaxGuidedTasks - 1) / kMaxGuidedTasks;
  if (n_tokens > kDecodeMaxTokens) {
    const int64_t tasks_wanted = kPrefillTasksPerThread * threads;
    min_units = std::max(min_units, (units + tasks_wanted - 1) / tasks_wanted);
  }
  const int64_t share = kGuidedShare * threads;
  int64_t tasks = 0;
  for (int m = 0; m < num_outs; ++m) {
    for (int64_t u = split.begin[m]; u < split.begin[m + 1];) {
      const int64_t size =
          std::min(split.begin[m + 1] - u, std::max(min_units, (units - u + share - 1) / share));
      CHECK_LT(tasks, kMaxGuidedTasks + kMaxMatMulOutputs);
      task_ranges[tasks++] = {m, split.Row(m, u), split.Row(m, u + size)};
      u += size;
    }
  }
  auto run = [&](int64_t task, int) {
    const TaskRange& tr = task_ranges[task];
    run_rows(tr.m, tr.r0, tr.r1, 0);
  };
  pool->Run(tasks, run, DecodeReadAhead(level, next, n_tokens, threads, share_calls));
}

}  // namespace

void MatMulAtLevel(SimdLevel level, const WeightMatrix& w, const float* x, int64_t n_tokens,
                   float* y, ThreadPool* pool, const MatMulNext& next) {
  const MatMulOutput out{&w, y};
  MatMulManyAtLevel(level, &out, 1, x, n_tokens, pool, next);
}

void MatMulMany(std::initializer_list<MatMulOutput> outs, const float* x, int64_t n_tokens,
                ThreadPool* pool) {
  MatMulManyAtLevel(ActiveSimdLevel(), outs, x, n_tokens, pool, {});
}

void MatMulManyAtLevel(SimdLevel level, std::initializer_list<MatMulOutput> outs, const float* x,
                       int64_t n_tokens, ThreadPool* pool, const MatMulNext& next) {
  CHECK(outs.size() >= 1 && outs.size() <= static_cast<size_t>(kMaxMatMulOutputs));
  bool same = true;
  for (const MatMulOutput& o : outs) {
    same = same && o.w->cols == outs.begin()->w->cols &&
           o.w->input_perm == outs.begin()->w->input_perm &&
           o.w->input_cols == outs.begin()->w->input_cols;
  }
  if (!same) {  // distinct widths or input permutations: one dispatch per matrix
    for (const MatMulOutput& o : outs) MatMulManyAtLevel(level, &o, 1, x, n_tokens, pool, {});
    return;
  }
  MatMulManyAtLevel(level, outs.begin(), static_cast<int>(outs.size()), x, n_tokens, pool, next);
}

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool) {
  MatMulAtLevel(ActiveSimdLevel(), w, x, n_tokens, y, pool);
}

}  // namespace pagellm
