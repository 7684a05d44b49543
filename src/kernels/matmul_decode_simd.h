// 256-bit SIMD parts of the decoding MatMul family (matmul_decode_internal.h), shared by
// matmul_decode_avx2.cc and matmul_decode_avx512.cc: the code decoders of every format (bit
// unpacking into int8 codes, the same bytes as the scalar decoders write) and the dot product of
// a decoded 32-element-block row with one token. Include only from a *_avx2.cc or *_avx512.cc
// file, after its simd_*.h; everything here has internal linkage, so each includer gets its own
// copy compiled with its own flags.
#pragma once

#include <algorithm>
#include <cmath>

#include "kernels/kernel_tuning.h"
#include "kernels/matmul_decode_internal.h"

namespace pagellm::kernels_internal {
namespace {

inline __m256i Nibbles(__m256i v) {
  return _mm256_and_si256(v, _mm256_set1_epi8(15));
}
inline __m256i HighNibbles(__m256i v) {
  return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(15));
}
inline __m256i Load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline void Store256(int8_t* p, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}
// 0xff in the bytes of v that have bit `bit` (a byte mask) set, else 0.
inline __m256i BitSet(__m256i v, int bit) {
  const __m256i b = _mm256_set1_epi8(static_cast<char>(bit));
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, b), b);
}
// All ones in the first n int32 lanes.
inline __m256i FirstLanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline __m256i Iq4Table() {
  return _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues)));
}

// The 256 codes of a super-block (DecodeSuperCodes' bytes).
template <DType kType>
inline void DecodeSuperCodesSimd(const uint8_t* p, int8_t* q) {
  if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
    constexpr int qs_off = kType == DType::kQ4_K ? 16 : 48;
    [[maybe_unused]] __m256i qh;
    if constexpr (kType == DType::kQ5_K) qh = Load256(p + 16);
    for (int c = 0; c < 4; ++c) {
      const __m256i v = Load256(p + qs_off + 32 * c);
      __m256i lo = Nibbles(v), hi = HighNibbles(v);
      if constexpr (kType == DType::kQ5_K) {
        const __m256i sixteen = _mm256_set1_epi8(16);
        lo = _mm256_or_si256(lo, _mm256_and_si256(BitSet(qh, 1 << (2 * c)), sixteen));
        hi = _mm256_or_si256(hi, _mm256_and_si256(BitSet(qh, 2 << (2 * c)), sixteen));
      }
      Store256(q + 64 * c, lo);
      Store256(q + 64 * c + 32, hi);
    }
  } else if constexpr (kType == DType::kQ6_K) {
    const __m256i three = _mm256_set1_epi8(3), m32 = _mm256_set1_epi8(32);
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = Load256(p + 64 * h), ql1 = Load256(p + 64 * h + 32);
      const __m256i qh = Load256(p + 128 + 32 * h);
      const __m256i lo[4] = {Nibbles(ql0), Nibbles(ql1), HighNibbles(ql0), HighNibbles(ql1)};
      for (int k = 0; k < 4; ++k) {
        const __m256i hb =
            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), three), 4);
        Store256(q + 128 * h + 32 * k, _mm256_sub_epi8(_mm256_or_si256(lo[k], hb), m32));
      }
    }
  } else if constexpr (kType == DType::kQ2_K || kType == DType::kQ3_K) {
    constexpr int qs_off = kType == DType::kQ2_K ? 16 : 32;
    const __m256i three = _mm256_set1_epi8(3);
    [[maybe_unused]] __m256i hm;
    if constexpr (kType == DType::kQ3_K) hm = Load256(p);
    for (int h = 0; h < 2; ++h) {
      const __m256i v = Load256(p + qs_off + 32 * h);
      for (int k = 0; k < 4; ++k) {
        __m256i c = _mm256_and_si256(_mm256_srli_epi16(v, 2 * k), three);
        if constexpr (kType == DType::kQ3_K) {
          // -4 where the high bit is clear.
          c = _mm256_sub_epi8(
              c, _mm256_andnot_si256(BitSet(hm, 1 << (4 * h + k)), _mm256_set1_epi8(4)));
        }
        Store256(q + 128 * h + 32 * k, c);
      }
    }
  } else {
    static_assert(kType == DType::kIQ4_XS);
    const __m256i table = Iq4Table();
    for (int j = 0; j < 8; j += 2) {
      const __m256i v = Load256(p + 8 + 16 * j);  // sub-blocks j, j + 1
      const __m256i lo = Nibbles(v), hi = HighNibbles(v);
      Store256(q + 32 * j, _mm256_shuffle_epi8(table, _mm256_permute2x128_si256(lo, hi, 0x20)));
      Store256(q + 32 * j + 32,
               _mm256_shuffle_epi8(table, _mm256_permute2x128_si256(lo, hi, 0x31)));
    }
  }
}

inline float HalfToFloat(uint16_t h) {
  return _cvtsh_ss(h);  // F16C: exact, as F16ToF32
}

// Scales, mins, d and m of a super-block (DecodeSuperScales' values). Q4_K / Q5_K unpack their
// 12 scale bytes four at a time in 32-bit lanes; the other types' 16 scales are plain bytes or
// nibbles and take the scalar path.
template <DType kType>
inline void DecodeSuperScalesSimd(const uint8_t* p, int16_t* sc, int16_t* mn, float* d, float* m) {
  if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
    uint16_t dd[2];
    uint32_t a, b, c;
    std::memcpy(dd, p, 4);
    std::memcpy(&a, p + 4, 4);
    std::memcpy(&b, p + 8, 4);
    std::memcpy(&c, p + 12, 4);
    // Bytes j of: scales 0..3 | 4..7, mins 0..3 | 4..7 (KScaleMin).
    const uint32_t sc_lo = a & 0x3f3f3f3f, m_lo = b & 0x3f3f3f3f;
    const uint32_t sc_hi = (c & 0x0f0f0f0f) | ((a >> 2) & 0x30303030);
    const uint32_t m_hi = ((c >> 4) & 0x0f0f0f0f) | ((b >> 2) & 0x30303030);
    const __m128i s8 = _mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi),
                                      static_cast<int>(m_lo), static_cast<int>(m_hi));
    // Each byte twice (per 16 elements), widened to int16.
    const __m128i dup_lo = _mm_unpacklo_epi8(s8, s8), dup_hi = _mm_unpackhi_epi8(s8, s8);
    _mm256_store_si256(reinterpret_cast<__m256i*>(sc), _mm256_cvtepu8_epi16(dup_lo));
    _mm256_store_si256(reinterpret_cast<__m256i*>(mn), _mm256_cvtepu8_epi16(dup_hi));
    *d = HalfToFloat(dd[0]);
    *m = -HalfToFloat(dd[1]);
  } else {
    DecodeSuperScales<kType>(p, sc, mn, d, m);
  }
}

// The 32 codes of a 32-element block (DecodeBlock32's bytes), and its d and m.
template <DType kType>
inline void DecodeBlock32Simd(const uint8_t* p, int8_t* q, float* d, float* m) {
  uint16_t h[2];
  std::memcpy(h, p, 4);
  *d = HalfToFloat(h[0]);
  *m = DecodeTraits<kType>::kHasMin ? HalfToFloat(h[1]) : 0.0f;
  constexpr int qs_off = kType == DType::kQ4_1     ? 4
                         : kType == DType::kIQ4_NL ? 2
                         : kType == DType::kQ5_0   ? 6
                                                   : 8;
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + qs_off));
  const __m128i nib = _mm_set1_epi8(15);
  const __m128i lo = _mm_and_si128(raw, nib), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), nib);
  __m256i c = _mm256_setr_m128i(lo, hi);
  if constexpr (kType == DType::kIQ4_NL) {
    c = _mm256_shuffle_epi8(Iq4Table(), c);
  } else if constexpr (kType == DType::kQ5_0 || kType == DType::kQ5_1) {
    int32_t qh;
    std::memcpy(&qh, p + qs_off - 4, 4);
    // Byte e takes byte e / 8 of qh, then bit e % 8 of it.
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(qh),
        _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
    const __m256i bits = _mm256_set1_epi64x(0x8040201008040201);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bits), bits);
    c = _mm256_or_si256(c, _mm256_and_si256(set, _mm256_set1_epi8(16)));
    if constexpr (kType == DType::kQ5_0) c = _mm256_sub_epi8(c, _mm256_set1_epi8(16));
  }
  Store256(q, c);
}

// Weights are read once, row after row (rows are contiguous, one task streams a range of
// them); each row is short (1-6 KiB), so the lines kPrefetchBytes ahead of the decoder are
// requested explicitly to keep the stream going across row ends.
inline const int64_t kPrefetchBytes = GetKernelTuning().row_prefetch_bytes;

template <int64_t kBytes>
inline void PrefetchAhead(const uint8_t* p) {
#pragma GCC unroll 8
  for (int64_t i = 0; i < kBytes; i += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + i), _MM_HINT_T0);
  }
}

template <DType kType>
inline void DecodeRowSimd(const uint8_t* row, int64_t cols, const DecodedRowLayout& l,
                          uint8_t* out) {
  auto* q = reinterpret_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(out + l.d_offset);
  auto* m = reinterpret_cast<float*>(out + l.m_offset);
  constexpr int64_t bb = DTypeBlockBytes(kType);
  if constexpr (DecodeTraits<kType>::kSuper) {
    auto* sc = reinterpret_cast<int16_t*>(out + l.sc_offset);
    auto* mn = reinterpret_cast<int16_t*>(out + l.mn_offset);
    for (int64_t s = 0; s < l.blocks; ++s) {
      PrefetchAhead<bb>(row + s * bb);
      DecodeSuperCodesSimd<kType>(row + s * bb, q + 256 * s);
      DecodeSuperScalesSimd<kType>(row + s * bb, sc + 16 * s, mn + 16 * s, d + s, m + s);
    }
  } else {
    const int64_t nb = cols / 32;
    for (int64_t b = 0; b < nb; ++b)
      DecodeBlock32Simd<kType>(row + b * bb, q + 32 * b, d + b, m + b);
    for (int64_t b = nb; b < l.blocks; ++b) {
      std::memset(q + 32 * b, 0, 32);
      d[b] = m[b] = 0.0f;
    }
  }
}

// Lane r = sum of the 8 int32 lanes of p[r].
inline __m256i ReduceLanes8(const __m256i (&p)[8]) {
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

// Signed codes times signed activations, as int16 pair sums (|code| <= 127: no saturation).
inline __m256i CodeDotPairs(__m256i qv, __m256i xv) {
  return _mm256_maddubs_epi16(_mm256_abs_epi8(qv), _mm256_sign_epi8(xv, qv));
}

// One token against a decoded row of 32-element blocks: the reference scheme with lane b % 8
// of one register per group of 8 blocks.
template <DType kType>
inline float Dot32Simd(const uint8_t* dec, const DecodedRowLayout& l, int64_t nb,
                       const uint8_t* act, const QuantActsLayout& al) {
  const __m256i ones = _mm256_set1_epi16(1);
  const auto* d = reinterpret_cast<const float*>(dec + l.d_offset);
  const auto* m = reinterpret_cast<const float*>(dec + l.m_offset);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b0 = 0; b0 < nb; b0 += 8) {
    const int valid = static_cast<int>(std::min<int64_t>(8, nb - b0));
    __m256i p[8];
    for (int i = 0; i < 8; ++i) {
      if (i < valid) {
        const int64_t off = 32 * (b0 + i);
        p[i] = _mm256_madd_epi16(CodeDotPairs(Load256(dec + off), Load256(act + off)), ones);
      } else {
        p[i] = _mm256_setzero_si256();
      }
    }
    const __m256i mask = FirstLanes(valid);
    const __m256 dx =
        _mm256_maskload_ps(reinterpret_cast<const float*>(act + al.dx_offset) + b0, mask);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ReduceLanes8(p)),
                          _mm256_mul_ps(_mm256_load_ps(d + b0), dx), acc);
    if constexpr (DecodeTraits<kType>::kHasMin) {
      const __m256i qsum =
          _mm256_maskload_epi32(reinterpret_cast<const int*>(act + al.bias_offset) + b0, mask);
      acc =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(qsum), _mm256_mul_ps(_mm256_load_ps(m + b0), dx), acc);
    }
  }
  alignas(32) float a[8];
  _mm256_store_ps(a, acc);
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

inline int32_t HSumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// S2 of a super-block: its 16 mins times the activation's 16 sub-block sums.
inline int32_t MinSum(const int16_t* mn, const uint8_t* bsum) {
  return HSumI32(_mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(mn)),
                                   _mm256_load_si256(reinterpret_cast<const __m256i*>(bsum))));
}

// Runs dot(decoded row, token t) for every row in [r0, r1) and token in [t0, t1): each row is
// decoded once per call into the thread's scratch.
template <DType kType, typename DecodeFn, typename DotFn>
inline void DecodeAndDot(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
                         DecodeFn decode, DotFn dot) {
  const WeightMatrix& w = *a.w;
  const DecodedRowLayout l = GetDecodedRowLayout(w.cols, DecodeTraits<kType>::kSuper);
  const int64_t act_bytes = DecodeTraits<kType>::kSuper ? GetQ8KActsLayout(w.cols).bytes
                                                        : GetQuantActsLayout(w.cols).bytes;
  uint8_t* dec = DecodeScratch(l.bytes);
  for (int64_t r = r0; r < r1; ++r) {
    decode(w.row(r), w.cols, l, dec);
    for (int64_t t = t0; t < t1; ++t) a.y[t * w.rows + r] = dot(dec, l, a.qx + t * act_bytes);
  }
}

}  // namespace
}  // namespace pagellm::kernels_internal
