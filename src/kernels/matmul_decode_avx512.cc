// AVX-512 (BW + VNNI) kernels of the decoding MatMul family (matmul_decode_internal.h). The
// super-block formats take 64 codes per step: vpmaddubsw pair sums of 4 sub-blocks, whose
// scales a word permute lays out, then vpdpwssd (VNNI) multiplies and accumulates them in one
// instruction. The 32-element block formats and the code decoders use the shared 256-bit code
// (matmul_decode_simd.h), compiled here with the AVX-512 flags. Results equal the scalar level's
// bit for bit.
#include "kernels/simd_avx512.h"
// (simd_avx512.h first: it sets the diagnostics <immintrin.h> needs.)
#include "kernels/matmul_decode_simd.h"

namespace pagellm::kernels_internal::avx512 {
namespace {

template <DType kType>
float DotSuper(const uint8_t* dec, const DecodedRowLayout& l, const uint8_t* act,
               const Q8KActsLayout& al) {
  constexpr bool kUnsigned =
      kType == DType::kQ2_K || kType == DType::kQ4_K || kType == DType::kQ5_K;
  const auto* d = reinterpret_cast<const float*>(dec + l.d_offset);
  const auto* m = reinterpret_cast<const float*>(dec + l.m_offset);
  // Step i covers sub-blocks 4i..4i+3; word w of its scale register is scale 4i + w / 8.
  __m512i idx[4];
  for (int i = 0; i < 4; ++i) {
    alignas(64) int16_t w[32];
    for (int j = 0; j < 32; ++j) w[j] = static_cast<int16_t>(4 * i + j / 8);
    idx[i] = _mm512_load_si512(w);
  }
  float acc = 0.0f;
  for (int64_t s = 0; s < l.blocks; ++s) {
    const __m512i sc = _mm512_castsi256_si512(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(dec + l.sc_offset + 32 * s)));
    __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512i qv = _mm512_loadu_si512(dec + 256 * s + 64 * i);
      const __m512i xv = _mm512_loadu_si512(act + 256 * s + 64 * i);
      __m512i pairs;
      if constexpr (kUnsigned) {
        pairs = _mm512_maddubs_epi16(qv, xv);
      } else {
        // |q| times x with q's sign (vpsignb has no 512-bit form).
        const __m512i xs =
            _mm512_mask_sub_epi8(xv, _mm512_movepi8_mask(qv), _mm512_setzero_si512(), xv);
        pairs = _mm512_maddubs_epi16(_mm512_abs_epi8(qv), xs);
      }
      isum = _mm512_dpwssd_epi32(isum, pairs, _mm512_permutexvar_epi16(idx[i], sc));
    }
    float dx;
    std::memcpy(&dx, act + al.d_offset + 4 * s, 4);
    acc = std::fma(static_cast<float>(_mm512_reduce_add_epi32(isum)), d[s] * dx, acc);
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
PAGELLM_DECODE_KERNEL(DType::kQ4_1)
PAGELLM_DECODE_KERNEL(DType::kQ5_0)
PAGELLM_DECODE_KERNEL(DType::kQ5_1)
PAGELLM_DECODE_KERNEL(DType::kIQ4_NL)
PAGELLM_DECODE_KERNEL(DType::kQ2_K)
PAGELLM_DECODE_KERNEL(DType::kQ3_K)
PAGELLM_DECODE_KERNEL(DType::kQ4_K)
PAGELLM_DECODE_KERNEL(DType::kQ5_K)
PAGELLM_DECODE_KERNEL(DType::kQ6_K)
PAGELLM_DECODE_KERNEL(DType::kIQ4_XS)
#undef PAGELLM_DECODE_KERNEL

}  // namespace pagellm::kernels_internal::avx512
