// Contract between the MatMul dispatcher (matmul.cc) and the per-ISA kernels
// (matmul_scalar.cc, matmul_avx2.cc, matmul_avx512.cc, matmul_quant_*.cc). Not a public API.
//
// Batch invariance: every kernel computes each output y[t][o] with one fixed instruction
// sequence that depends only on (weight row o, token t, cols), never on the tile shape, on
// which other rows/tokens share the tile, or on the thread that runs it. Tiles differ only in
// how many independent accumulators they keep in registers.
//
// Quantized weights (Q8_0, Q4_0) multiply activations quantized per token into "paired
// blocks" (QuantActs below). All ISA levels use the same layout and the same 16-lane float
// accumulation, so their results are bitwise identical to each other (the scalar level
// emulates the lanes).
#pragma once

#include <cstdint>

#include "kernels/weight_matrix.h"
#include "pagellm/dtype.h"

namespace pagellm::kernels_internal {

// ---- Quantized activations ------------------------------------------------------------------
//
// One token's activation row of `cols` floats (cols % 32 == 0) becomes ceil(cols / 64) "pairs"
// of two Q8 blocks (blocks 2p and 2p+1; a missing odd last block is all zeros). Each pair is
// kQPairBytes bytes:
//   qs   int8[64]    quantized values, q = roundf(x / d), |q| <= 127
//   dx   float[16]   block scale d per int32 lane (lane l covers qs bytes 4l..4l+3)
//   bias int32[16]  per lane: -c * (sum of that lane's 4 qs), c = 8 (Q4_0) or 128 (Q8_0)
// The byte order of qs follows how weights unpack into a 64-byte register:
//   Q8_0 weights: qs[0:32] = block 2p, qs[32:64] = block 2p+1 (natural order).
//   Q4_0 weights: qs[0:16] = block 2p elems 0..15, qs[16:32] = block 2p+1 elems 0..15,
//                 qs[32:48] = block 2p elems 16..31, qs[48:64] = block 2p+1 elems 16..31
//                 (low nibbles of both blocks, then high nibbles).
// The bias turns the unsigned-by-signed byte dot product (vpdpbusd) into the signed one:
//   Q4_0: sum (nib) * q - 8 * sum q             = sum (nib - 8) * q
//   Q8_0: sum (w xor 0x80) * q - 128 * sum q   = sum w * q
constexpr int64_t kQPairBytes = 64 + 16 * 4 + 16 * 4;
constexpr int64_t kQPairElems = 64;

inline int64_t QuantActsPairs(int64_t cols) { return (cols + kQPairElems - 1) / kQPairElems; }
inline int64_t QuantActsBytes(int64_t cols) { return QuantActsPairs(cols) * kQPairBytes; }

// Reference quantization of one block of 32 activations (ggml's q8_0 rounding: d = amax/127,
// q = roundf(x * (1/d)), d kept in fp32). Every ISA's PrepareQuantActs must match it exactly.
void QuantizeActBlock(const float* x, int8_t* q, float* d);

// Position in a pair's qs[64] of element e (0..31) of the pair's block b (0 or 1).
inline int QuantActsPos(DType wtype, int b, int e) {
  if (wtype == DType::kQ8_0) return b * 32 + e;
  return (e < 16 ? 0 : 32) + b * 16 + (e & 15);
}

// ---- Kernel entry points ------------------------------------------------------------------

struct MatMulArgs {
  const WeightMatrix* w = nullptr;
  const float* x = nullptr;     // F32/F16/BF16 weights: [n_tokens][cols]
  const uint8_t* qx = nullptr;  // Q8_0/Q4_0 weights: [n_tokens][QuantActsBytes(cols)]
  float* y = nullptr;           // [n_tokens][rows]
};

// Computes y[t][r] for t in [t0, t1), r in [r0, r1).
using MatMulBlockFn = void (*)(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0,
                               int64_t t1);
// Writes QuantActsBytes(cols) bytes for one token (wtype selects the layout and bias).
using PrepareQuantActsFn = void (*)(DType wtype, const float* x, int64_t cols, uint8_t* out);

// Register-tile geometry of a block kernel; the dispatcher aligns thread row splits to
// row_tile and token blocks to token_tile so that few tail tiles are needed.
inline constexpr int kScalarRowTile = 1, kScalarTokenTile = 1;
inline constexpr int kAvx2FloatRowTile = 4, kAvx2FloatTokenTile = 2;
inline constexpr int kAvx2QuantRowTile = 2, kAvx2QuantTokenTile = 2;
inline constexpr int kAvx512FloatRowTile = 4, kAvx512FloatTokenTile = 6;
inline constexpr int kAvx512QuantRowTile = 4, kAvx512QuantTokenTile = 4;

namespace scalar {
void MatMulFloatBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
void MatMulQuantBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
void PrepareQuantActs(DType wtype, const float* x, int64_t cols, uint8_t* out);
}  // namespace scalar

namespace avx2 {
void MatMulFloatBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
void MatMulQuantBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
void PrepareQuantActs(DType wtype, const float* x, int64_t cols, uint8_t* out);
}  // namespace avx2

namespace avx512 {
void MatMulFloatBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
// Needs AVX512_VNNI (vpdpbusd); the dispatcher falls back to avx2 without it.
void MatMulQuantBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
void PrepareQuantActs(DType wtype, const float* x, int64_t cols, uint8_t* out);
}  // namespace avx512

}  // namespace pagellm::kernels_internal
