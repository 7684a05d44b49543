// Contract between the MatMul dispatcher (matmul.cc) and the per-ISA kernels
// (matmul_scalar.cc, matmul_avx2.cc, matmul_avx512.cc, matmul_quant_*.cc). Not a public API.
//
// Batch invariance: every kernel computes each output y[t][o] with one fixed instruction
// sequence that depends only on (weight row o, token t, cols), never on the tile shape, on
// which other rows/tokens share the tile, or on the thread that runs it. Tiles differ only in
// how many independent accumulators they keep in registers.
//
// Quantized weights (Q8_0, Q4_0, Q4_Z) multiply activations quantized per token into Q8 blocks
// (QuantActs below). Each output is computed as
//   acc = 0; for each block b in order: acc = fma(float(isum_b), d_w,b * d_x,b, acc)
// where isum_b is the exact int32 dot product of the block's 32 quantized values. Only the
// integer part is vectorized (in any order: it is exact), so every ISA level -- and the scalar
// reference -- produces bitwise identical results.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/weight_matrix.h"
#include "pagellm/check.h"
#include "pagellm/dtype.h"

namespace pagellm::kernels_internal {

// Calls fn(std::integral_constant<int, N>()) with N == n, for n in [1, kMax]: turns a runtime
// tile size (tokens of a tail tile, of a decode step) into the compile-time one the kernels are
// templated on. n outside the range is a bug.
template <int kMax, typename Fn>
inline void WithTileSize(int64_t n, Fn&& fn) {
  CHECK(n >= 1 && n <= kMax) << "tile size " << n << " outside [1, " << kMax << "]";
  // One comparison per candidate size; the first match calls fn and stops the fold.
  const auto dispatch = [&]<int... kI>(std::integer_sequence<int, kI...>) {
    (void)((n == kI + 1 && (fn(std::integral_constant<int, kI + 1>()), true)) || ...);
  };
  dispatch(std::make_integer_sequence<int, kMax>());
}

// ---- Quantized activations ------------------------------------------------------------------
//
// One token's activation row of `cols` floats (cols % 32 == 0, nb = cols / 32 blocks) becomes
// QuantActsBytes(cols) bytes (a multiple of 64):
//   qs   int8[np * 64]   q = roundf(x / d) of block b at [32b, 32b + 32), |q| <= 127; a missing
//                        odd last block is zero, so 64-byte loads of a block pair stay inside.
//   dx   float[2 * np]   block scale d = amax / 127 (fp32), entries >= nb are 0
//   bias int32[2 * np]   -c * sum(q of block b), c = 8 (Q4_0), 128 (Q8_0) or 1 (Q4_Z)
// with np = ceil(nb / 2). The bias turns the unsigned-by-signed byte dot product (vpdpbusd)
// with an unsigned weight code u = w + c into the signed one:
//   Q4_0: u = nibble (w = nibble - 8);  Q8_0: u = w xor 0x80 (= w + 128 as uint8)
//   sum u * q - c * sum q = sum w * q.
struct QuantActsLayout {
  int64_t nb = 0;           // blocks of 32
  int64_t np = 0;           // block pairs, ceil(nb / 2)
  int64_t dx_offset = 0;    // bytes from the token's start
  int64_t bias_offset = 0;  // bytes from the token's start
  int64_t bytes = 0;        // per token, multiple of 64
};

inline QuantActsLayout GetQuantActsLayout(int64_t cols) {
  QuantActsLayout l;
  l.nb = cols / 32;
  l.np = (l.nb + 1) / 2;
  l.dx_offset = l.np * 64;
  l.bias_offset = l.dx_offset + l.np * 8;
  l.bytes = (l.bias_offset + l.np * 8 + 63) / 64 * 64;
  return l;
}
inline int64_t QuantActsBytes(int64_t cols) {
  return GetQuantActsLayout(cols).bytes;
}

// Reference quantization of one block of 32 activations (ggml's q8_0 rounding: d = amax/127,
// q = roundf(x * (1/d)), d kept in fp32). Every ISA's PrepareQuantActs must match it exactly.
void QuantizeActBlock(const float* x, int8_t* q, float* d);

// ---- Kernel entry points ------------------------------------------------------------------

struct MatMulArgs {
  const WeightMatrix* w = nullptr;
  const float* x = nullptr;     // F32/F16/BF16 weights: [n_tokens][cols]
  const uint8_t* qx = nullptr;  // Q8_0/Q4_0 weights: [n_tokens][QuantActsBytes(cols)]
  float* y = nullptr;           // [n_tokens][rows]
  // The end of the rows this thread streams right after the block's (its share of a decode
  // MatMul, matmul.cc): the packed K-quant / IQ4_XS kernel's software prefetch may run on up to
  // it instead of stopping at the block's last row group. 0: stop at the block's end. (The
  // other formats' decode takes guided tasks, whose next task is elsewhere: they ignore it.)
  int64_t prefetch_row_end = 0;
};

// Computes y[t][r] for t in [t0, t1), r in [r0, r1).
using MatMulBlockFn = void (*)(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
// Writes QuantActsBytes(cols) bytes for one token; code_offset is the weight format's c (the
// bias above), WeightFormat::act_code_offset.
using PrepareQuantActsFn = void (*)(int32_t code_offset, const float* x, int64_t cols,
                                    uint8_t* out);

// A weight format's block kernel at each SIMD level, indexed by SimdLevel (the matmul plan of
// its traits row, weight_format.h). Tiles, activation preparation and token blocking belong to
// the kernel family (WeightFormat::matmul), chosen by the dispatcher.
struct MatMulKernels {
  MatMulBlockFn block[3] = {};  // kScalar, kAvx2, kAvx512
};

// Register-tile geometry of a block kernel; the dispatcher aligns thread row splits to
// row_tile and token blocks to token_tile so that few tail tiles are needed.
inline constexpr int kScalarRowTile = 1, kScalarTokenTile = 1;
inline constexpr int kAvx2FloatRowTile = 4, kAvx2FloatTokenTile = 2;
inline constexpr int kAvx2QuantRowTile = 8, kAvx2QuantTokenTile = 1;
inline constexpr int kAvx512FloatRowTile = 4, kAvx512FloatTokenTile = 12;
inline constexpr int kAvx512QuantRowTile = 16, kAvx512QuantTokenTile = 8;

// The block kernels are instantiated for the weight types of their family: the float ones for
// F32, F16 and BF16, the quantized ones for Q8_0, Q4_0 and (scalar, AVX2) Q4_Z and Q4_Z128,
// whose AVX-512 kernels are MatMulQ4ZBlock<kType> (weight_format.cc names them).
//
// Q4_Z (x = d * (u - z), u the nibble, z the block's zero point; act_code_offset 1, so the
// activation bias field is -sum(q)): isum_b = sum u * q + z * bias_b = sum (u - z) * q, exact,
// then the fp32 step above.
//
// Q4_Z128 (one d_w and z per 128 inputs, i.e. per 4 activation blocks b = 4g..4g+3): the same
// exact isum_b, then per group g
//   f = float(isum_4g) * d_x,4g;  f = fma(float(isum_b), d_x,b, f) for the next three b
//   acc = fma(f, d_w,g, acc)
// (the weight scale multiplies once per 128 inputs instead of once per block).
namespace scalar {
template <DType kType>
void MatMulFloatBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
template <DType kType>
void MatMulQuantBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
void PrepareQuantActs(int32_t code_offset, const float* x, int64_t cols, uint8_t* out);
}  // namespace scalar

namespace avx2 {
template <DType kType>
void MatMulFloatBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
template <DType kType>
void MatMulQuantBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
void PrepareQuantActs(int32_t code_offset, const float* x, int64_t cols, uint8_t* out);
}  // namespace avx2

namespace avx512 {
template <DType kType>
void MatMulFloatBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
// Needs AVX512_VNNI (vpdpbusd); the dispatcher falls back to avx2 without it.
template <DType kType>
void MatMulQuantBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
void PrepareQuantActs(int32_t code_offset, const float* x, int64_t cols, uint8_t* out);
// Q4_Z / Q4_Z128 weights (matmul_q4z_avx512.cc): streams the packed copy (w->packed,
// packed_weights.h) when there is one, else packs each 16-row group on the fly. Needs VNNI.
template <DType kType>
void MatMulQ4ZBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
// F16 weights with a lane-layout copy (w->packed, packed_weights.h), 1..4 tokens; r0 is a
// multiple of 16. Same results as MatMulFloatBlock on the row-major weights.
void DecodeF16Lanes(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
// BF16 weights (row-major), more than 4 tokens, on CPUs with AVX512-BF16: the vdpbf16ps
// prefill with rows in the lanes (matmul_bf16_lanes_avx512.cc). Same results as the decode
// order's TileBf16, bit for bit.
void PrefillBf16Lanes(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
}  // namespace avx512

}  // namespace pagellm::kernels_internal
