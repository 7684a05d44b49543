// AVX2 kernels of the decoding MatMul family (matmul_decode_internal.h): SIMD code decoders,
// maddubs / madd integer dot products with per-16 scales from a byte shuffle, and the
// reference's fp32 steps, so results equal the scalar level's bit for bit.
#include "kernels/simd_avx2.h"
// (simd_avx2.h first: it sets the diagnostics <immintrin.h> needs.)
#include "kernels/matmul_decode_simd.h"

namespace pagellm::kernels_internal::avx2 {
namespace {

// One token against a decoded row of super-blocks. Chunk k (32 codes) covers sub-blocks 2k and
// 2k + 1, which the int16 pair sums keep in the low and high 128-bit lanes; a byte shuffle of the
// 16 scales gives [sc_2k x 8 | sc_2k+1 x 8] for vpmaddwd.
template <DType kType>
float DotSuper(const uint8_t* dec, const DecodedRowLayout& l, const uint8_t* act,
               const Q8KActsLayout& al) {
  constexpr bool kUnsigned =
      kType == DType::kQ2_K || kType == DType::kQ4_K || kType == DType::kQ5_K;
  const auto* d = reinterpret_cast<const float*>(dec + l.d_offset);
  const auto* m = reinterpret_cast<const float*>(dec + l.m_offset);
  // Control k: low lane bytes 4k, 4k + 1 (scale 2k of the four in that lane), high lane 4k + 2,
  // 4k + 3, each repeated 8 times.
  __m256i ctrl[4];
  for (int k = 0; k < 4; ++k) {
    ctrl[k] =
        _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>((4 * k) | ((4 * k + 1) << 8))),
                          _mm_set1_epi16(static_cast<int16_t>((4 * k + 2) | ((4 * k + 3) << 8))));
  }
  float acc = 0.0f;
  for (int64_t s = 0; s < l.blocks; ++s) {
    const __m256i sc =
        _mm256_load_si256(reinterpret_cast<const __m256i*>(dec + l.sc_offset + 32 * s));
    const __m256i half[2] = {_mm256_permute2x128_si256(sc, sc, 0x00),
                             _mm256_permute2x128_si256(sc, sc, 0x11)};
    __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m256i qv = Load256(dec + 256 * s + 32 * k);
      const __m256i xv = Load256(act + 256 * s + 32 * k);
      const __m256i pairs = kUnsigned ? _mm256_maddubs_epi16(qv, xv) : CodeDotPairs(qv, xv);
      const __m256i scv = _mm256_shuffle_epi8(half[k / 4], ctrl[k % 4]);
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pairs, scv));
    }
    float dx;
    std::memcpy(&dx, act + al.d_offset + 4 * s, 4);
    acc = std::fma(static_cast<float>(HSumI32(isum)), d[s] * dx, acc);
    if constexpr (DecodeTraits<kType>::kHasMin) {
      const int32_t s2 = MinSum(reinterpret_cast<const int16_t*>(dec + l.mn_offset + 32 * s),
                                act + al.bsum_offset + 32 * s);
      acc = std::fma(static_cast<float>(s2), m[s] * dx, acc);
    }
  }
  return acc;
}

}  // namespace

template <DType kType>
void MatMulDecodeBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const int64_t cols = a.w->cols;
  if constexpr (DecodeTraits<kType>::kSuper) {
    const Q8KActsLayout al = GetQ8KActsLayout(cols);
    DecodeAndDot<kType>(a, r0, r1, t0, t1, DecodeRowSimd<kType>,
                        [&](const uint8_t* dec, const DecodedRowLayout& l, const uint8_t* act) {
                          return DotSuper<kType>(dec, l, act, al);
                        });
  } else {
    const QuantActsLayout al = GetQuantActsLayout(cols);
    DecodeAndDot<kType>(a, r0, r1, t0, t1, DecodeRowSimd<kType>,
                        [&](const uint8_t* dec, const DecodedRowLayout& l, const uint8_t* act) {
                          return Dot32Simd<kType>(dec, l, al.nb, act, al);
                        });
  }
}

#define PAGELLM_DECODE_KERNEL(T) \
  template void MatMulDecodeBlock<T>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
PAGELLM_FOR_EACH_DECODE_TYPE(PAGELLM_DECODE_KERNEL)
#undef PAGELLM_DECODE_KERNEL

}  // namespace pagellm::kernels_internal::avx2
