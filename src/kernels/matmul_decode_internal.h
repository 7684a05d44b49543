// The decoding MatMul family (MatMulFamily::kInt8Decode): the GGUF-only block types (Q4_1,
// Q5_0, Q5_1, IQ4_NL in blocks of 32; Q2_K..Q6_K, IQ4_XS in super-blocks of 256). Not a public
// API.
//
// A kernel decodes each weight row once per token block into int8 codes plus small integer
// sub-block scales (the "decoded row" below, in a per-thread L1-sized scratch), then takes exact
// integer dot products of the codes with every token's quantized activations. The fp32 steps
// are fixed by (row, token, cols) alone, and the integer sums are exact in any order, so every
// SIMD level and the scalar reference give bitwise identical results:
//
// 32-element blocks (Q8_0-style activations, matmul_internal.h QuantActs, with
// act_code_offset = -1 so that each block's bias field holds +sum(q)):
//   per block b: S = sum_i code_i * q_i (int32), d_b, m_b from the block (m_b = 0 without min)
//   lane b % 8: acc[b % 8] = fma(float(S), d_b * dx_b, acc[b % 8])
//               and with a min: acc[b % 8] = fma(float(sum q), m_b * dx_b, acc[b % 8])
//   y = ((acc0 + acc1) + (acc2 + acc3)) + ((acc4 + acc5) + (acc6 + acc7))
// 256-element super-blocks (Q8K activations below):
//   S1 = sum_j sc_j * sum_{i in sub-block j of 16} code_i * q_i,  S2 = sum_j mn_j * bsum_j
//   acc = fma(float(S1), d * dx, acc); with a min: acc = fma(float(S2), m * dx, acc)
// (|S1| < 2^28, |S2| < 2^21: int32 is exact.)
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/quant_blocks.h"

namespace pagellm::kernels_internal {

// ---- Q8K activations ----------------------------------------------------------------------------
//
// One token's row of cols floats (cols % 256 == 0, nsb = cols / 256 super-blocks) becomes
// Q8KActsBytes(cols) bytes (a multiple of 64):
//   qs    int8[256 * nsb]   q = roundf(x / d), d = amax / 127 over the super-block (fp32)
//   d     float[nsb]
//   bsum  int16[16 * nsb]   sum of q over each 16 elements
struct Q8KActsLayout {
  int64_t nsb = 0;
  int64_t d_offset = 0;     // bytes from the token's start
  int64_t bsum_offset = 0;  // bytes from the token's start, 32-byte aligned
  int64_t bytes = 0;        // per token, multiple of 64
};

inline Q8KActsLayout GetQ8KActsLayout(int64_t cols) {
  Q8KActsLayout l;
  l.nsb = cols / 256;
  l.d_offset = 256 * l.nsb;
  l.bsum_offset = (l.d_offset + 4 * l.nsb + 31) / 32 * 32;
  l.bytes = (l.bsum_offset + 32 * l.nsb + 63) / 64 * 64;
  return l;
}

// The reference (used at the scalar and AVX2 levels); the code offset is unused.
void PrepareQ8KActs(int32_t code_offset, const float* x, int64_t cols, uint8_t* out);
namespace avx512 {
// The same bytes, vectorized (matmul_quant_avx512.cc).
void PrepareQ8KActs(int32_t code_offset, const float* x, int64_t cols, uint8_t* out);
}  // namespace avx512

// ---- Decoded rows -------------------------------------------------------------------------------
//
// 32-element block formats, nb = cols / 32, nbp = nb rounded up to 8:
//   q int8[32 * nbp] | d float[nbp] | m float[nbp]     (padding blocks: codes 0, d = m = 0)
// Super-block formats, nsb = cols / 256:
//   q int8[256 * nsb] | sc int16[16 * nsb] | mn int16[16 * nsb] | d float[nsb] | m float[nsb]
// Every part starts 32-byte aligned.
struct DecodedRowLayout {
  int64_t blocks = 0;                    // nbp or nsb
  int64_t sc_offset = 0, mn_offset = 0;  // super-blocks only
  int64_t d_offset = 0, m_offset = 0;
  int64_t bytes = 0;
};

inline int64_t Align32(int64_t n) {
  return (n + 31) / 32 * 32;
}

inline DecodedRowLayout GetDecodedRowLayout(int64_t cols, bool super) {
  DecodedRowLayout l;
  if (super) {
    l.blocks = cols / 256;
    l.sc_offset = cols;
    l.mn_offset = l.sc_offset + Align32(32 * l.blocks);
    l.d_offset = l.mn_offset + Align32(32 * l.blocks);
  } else {
    l.blocks = (cols / 32 + 7) / 8 * 8;
    l.d_offset = 32 * l.blocks;
  }
  l.m_offset = l.d_offset + Align32(4 * l.blocks);
  l.bytes = l.m_offset + Align32(4 * l.blocks);
  return l;
}

// Per-format constants of the family.
template <DType kType>
struct DecodeTraits {
  static constexpr bool kSuper = DTypeBlockElems(kType) == 256;
  static constexpr bool kHasMin = kType == DType::kQ4_1 || kType == DType::kQ5_1 ||
                                  kType == DType::kQ2_K || kType == DType::kQ4_K ||
                                  kType == DType::kQ5_K;
};

// ---- Scalar decoders (the reference; the SIMD ones must write the same bytes) -------------------

// 32 codes of a 32-element block, its d and m (0 without a min).
template <DType kType>
inline void DecodeBlock32(const uint8_t* p, int8_t* q, float* d, float* m) {
  *m = 0.0f;
  if constexpr (kType == DType::kQ4_1) {
    const auto b = LoadBlock<BlockQ4_1>(p);
    for (int j = 0; j < 16; ++j) {
      q[j] = static_cast<int8_t>(b.qs[j] & 15);
      q[j + 16] = static_cast<int8_t>(b.qs[j] >> 4);
    }
    *d = F16ToF32(b.d);
    *m = F16ToF32(b.m);
  } else if constexpr (kType == DType::kIQ4_NL) {
    const auto b = LoadBlock<BlockIQ4_NL>(p);
    for (int j = 0; j < 16; ++j) {
      q[j] = kIq4NlValues[b.qs[j] & 15];
      q[j + 16] = kIq4NlValues[b.qs[j] >> 4];
    }
    *d = F16ToF32(b.d);
  } else {
    static_assert(kType == DType::kQ5_0 || kType == DType::kQ5_1);
    using B = std::conditional_t<kType == DType::kQ5_0, BlockQ5_0, BlockQ5_1>;
    const auto b = LoadBlock<B>(p);
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    const int off = kType == DType::kQ5_0 ? 16 : 0;
    for (int j = 0; j < 16; ++j) {
      q[j] = static_cast<int8_t>(((b.qs[j] & 15) | (((qh >> j) & 1) << 4)) - off);
      q[j + 16] = static_cast<int8_t>(((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - off);
    }
    *d = F16ToF32(b.d);
    if constexpr (kType == DType::kQ5_1) *m = F16ToF32(b.m);
  }
}

// The 16 sub-block scales and mins (per 16 elements; a 32-element sub-block's value repeated)
// and d, m of a super-block. The codes are DecodeSuperCodes'.
template <DType kType>
inline void DecodeSuperScales(const uint8_t* p, int16_t* sc, int16_t* mn, float* d, float* m) {
  *m = 0.0f;
  for (int j = 0; j < 16; ++j) mn[j] = 0;
  if constexpr (kType == DType::kQ2_K) {
    const auto b = LoadBlock<BlockQ2_K>(p);
    for (int j = 0; j < 16; ++j) {
      sc[j] = static_cast<int16_t>(b.scales[j] & 15);
      mn[j] = static_cast<int16_t>(b.scales[j] >> 4);
    }
    *d = F16ToF32(b.d);
    *m = -F16ToF32(b.dmin);
  } else if constexpr (kType == DType::kQ3_K) {
    const auto b = LoadBlock<BlockQ3_K>(p);
    for (int j = 0; j < 16; ++j) sc[j] = static_cast<int16_t>(Q3KScale(b.scales, j) - 32);
    *d = F16ToF32(b.d);
  } else if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
    uint16_t dd[2];
    uint8_t s[12];
    std::memcpy(dd, p, 4);
    std::memcpy(s, p + 4, 12);
    for (int j = 0; j < 8; ++j) {
      int a, c;
      KScaleMin(s, j, &a, &c);
      sc[2 * j] = sc[2 * j + 1] = static_cast<int16_t>(a);
      mn[2 * j] = mn[2 * j + 1] = static_cast<int16_t>(c);
    }
    *d = F16ToF32(dd[0]);
    *m = -F16ToF32(dd[1]);
  } else if constexpr (kType == DType::kQ6_K) {
    const auto b = LoadBlock<BlockQ6_K>(p);
    for (int j = 0; j < 16; ++j) sc[j] = b.scales[j];
    *d = F16ToF32(b.d);
  } else {
    static_assert(kType == DType::kIQ4_XS);
    const auto b = LoadBlock<BlockIQ4_XS>(p);
    for (int j = 0; j < 8; ++j) {
      const int ls =
          ((b.scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((b.scales_h >> (2 * j)) & 3) << 4);
      sc[2 * j] = sc[2 * j + 1] = static_cast<int16_t>(ls - 32);
    }
    *d = F16ToF32(b.d);
  }
}

// The 256 codes of a super-block in element order (Q3_K: -4..3, Q6_K: -32..31, IQ4_XS: the
// table values; the others unsigned).
template <DType kType>
inline void DecodeSuperCodes(const uint8_t* p, int8_t* q) {
  if constexpr (kType == DType::kQ2_K || kType == DType::kQ3_K) {
    using B = std::conditional_t<kType == DType::kQ2_K, BlockQ2_K, BlockQ3_K>;
    const auto b = LoadBlock<B>(p);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      int v = (b.qs[32 * h + l] >> (2 * k)) & 3;
      if constexpr (kType == DType::kQ3_K) v -= ((b.hmask[l] >> (4 * h + k)) & 1) ? 0 : 4;
      q[e] = static_cast<int8_t>(v);
    }
  } else if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
    using B = std::conditional_t<kType == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
    const auto b = LoadBlock<B>(p);
    for (int e = 0; e < 256; ++e) {
      const int c = e / 64, l = e % 32, hi = (e % 64) / 32;
      int v = (b.qs[32 * c + l] >> (4 * hi)) & 15;
      if constexpr (kType == DType::kQ5_K) v |= ((b.qh[l] >> (2 * c + hi)) & 1) << 4;
      q[e] = static_cast<int8_t>(v);
    }
  } else if constexpr (kType == DType::kQ6_K) {
    const auto b = LoadBlock<BlockQ6_K>(p);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int lo = (b.ql[64 * h + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 15;
      q[e] = static_cast<int8_t>((lo | (((b.qh[32 * h + l] >> (2 * k)) & 3) << 4)) - 32);
    }
  } else {
    static_assert(kType == DType::kIQ4_XS);
    const auto b = LoadBlock<BlockIQ4_XS>(p);
    for (int j = 0; j < 8; ++j) {
      for (int i = 0; i < 16; ++i) {
        q[32 * j + i] = kIq4NlValues[b.qs[16 * j + i] & 15];
        q[32 * j + i + 16] = kIq4NlValues[b.qs[16 * j + i] >> 4];
      }
    }
  }
}

// ---- Kernels ------------------------------------------------------------------------------------

// The types of the decoding family, once: X(type) for each (each SIMD level's file
// instantiates its MatMulDecodeBlock for all of them).
// clang-format off
#define PAGELLM_FOR_EACH_DECODE_TYPE(X) \
  X(DType::kQ4_1) \
  X(DType::kQ5_0) \
  X(DType::kQ5_1) \
  X(DType::kIQ4_NL) \
  X(DType::kQ2_K) \
  X(DType::kQ3_K) \
  X(DType::kQ4_K) \
  X(DType::kQ5_K) \
  X(DType::kQ6_K) \
  X(DType::kIQ4_XS)
// clang-format on

namespace scalar {
template <DType kType>
void MatMulDecodeBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
}  // namespace scalar
namespace avx2 {
template <DType kType>
void MatMulDecodeBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
}  // namespace avx2
namespace avx512 {
// Needs AVX512_VNNI; the dispatcher falls back to avx2 without it.
template <DType kType>
void MatMulDecodeBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
// Q4_K, Q5_K, Q6_K, IQ4_XS: the kernels over the packed copy (kquant_packed.h) when the matrix
// has one (row ranges then start on 16-row groups), else MatMulDecodeBlock.
template <DType kType>
void MatMulKQuantBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
// Whether the packed kernels unpack codes with byte-instruction extensions: Q5_K's fifth bits by
// GFNI (vgf2p8affineqb), IQ4_XS's table lookups by AVX512-VBMI (vpermb). Each where the CPU has
// it, unless PAGELLM_GFNI=0 / PAGELLM_VBMI=0 (A/B runs). Same results. Tests turn both off to
// run the base paths, and back on (as the CPU and environment allow).
void SetKQuantByteIsaForTesting(bool enabled);
}  // namespace avx512

// Per-calling-thread scratch of at least `bytes`, 64-byte aligned (grows, never shrinks).
uint8_t* DecodeScratch(int64_t bytes);

}  // namespace pagellm::kernels_internal
