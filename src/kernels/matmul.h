// Dense matrix multiplication against a weight matrix: the hot path of every linear layer.
//
//   y[t][o] = sum_i W[o][i] * x[t][i]     x: [n_tokens][w.cols] fp32, y: [n_tokens][w.rows] fp32
//
// Weight types and arithmetic:
//   F32 / F16 / BF16: weights widened to fp32 (exact), fp32 FMA accumulation; activations
//     stay fp32.
//   Q8_0 / Q4_0: each token's activations are quantized to Q8 blocks of 32 (fp32 scale
//     d = amax/127, q = round(x/d), as llama.cpp's q8_0 activations), block dot products are
//     exact int32 (AVX-512 VNNI), and d_w * d_x * isum is accumulated in fp32 block by block.
//
// A matrix with an input permutation (WeightMatrix::input_perm, GPTQ act-order checkpoints)
// multiplies x gathered through it, once per call, into per-thread scratch; with
// WeightMatrix::input_cols set, x is [n_tokens][input_cols] (wider than the matrix).
//
// Batch invariance: y[t][o] is bitwise identical whatever n_tokens is, whichever other tokens
// are in x, however many threads the pool has and whichever row range a thread gets. For
// Q8_0 / Q4_0 it is also identical across SIMD levels; for float weights each level has its
// own (fixed) summation order.
//
// Threading: rows are split into a few contiguous ranges per pool thread (weights streamed
// once, linearly, with software prefetch, for decode); prefill walks tokens in cache-sized
// blocks and packs weight panels so each weight is reused across many tokens from registers.
// Scratch buffers are per thread and grow on demand; no allocation in the steady state.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace pagellm {

// pool may be null (runs on the calling thread). Uses ActiveSimdLevel(). y must not alias x.
void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool);

inline constexpr int kMaxMatMulOutputs = 4;

// The MatMul call expected after this one (a decode step repeats its order of calls): its
// matrices, in order. With KernelTuning::idle_read_ahead_bytes, threads that run out of work
// prefetch where that call's threads start (ThreadPool ReadAhead); results never depend on it.
struct MatMulNext {
  const WeightMatrix* w[kMaxMatMulOutputs] = {};
  int count = 0;
};

// As MatMul at an explicit SIMD level (for tests and benchmarks); CHECK-fails if the CPU lacks
// the level's instructions.
void MatMulAtLevel(SimdLevel level, const WeightMatrix& w, const float* x, int64_t n_tokens,
                   float* y, ThreadPool* pool, const MatMulNext& next = {});

// One matrix of a MatMulMany call and its output y: [n_tokens][w->rows].
struct MatMulOutput {
  const WeightMatrix* w = nullptr;
  float* y = nullptr;
};

// MatMul of several matrices against the same x (e.g. the Q, K, V projections): one pool
// dispatch when they share cols and input permutation, whatever their dtypes (K-quant files mix
// Q4_K and Q6_K in one layer), with activations prepared once per distinct activation layout
// (else one dispatch each). Each y is bitwise what MatMul would write.
void MatMulMany(std::initializer_list<MatMulOutput> outs, const float* x, int64_t n_tokens,
                ThreadPool* pool);
void MatMulManyAtLevel(SimdLevel level, std::initializer_list<MatMulOutput> outs, const float* x,
                       int64_t n_tokens, ThreadPool* pool, const MatMulNext& next = {});

// True if MatMul supports `t` as a weight type (F32, F16, BF16, Q8_0, Q4_0).
bool IsMatMulWeightType(DType t);

}  // namespace pagellm
