// Small AVX2 helpers shared by the *_avx2.cc kernels. Include only from translation units
// compiled with the AVX2 flags (CMake gives them to files named *_avx2.cc).
#pragma once

// GCC 12 reports -W(maybe-)uninitialized inside the intrinsic headers for intrinsics built on
// _mm*_undefined_*() (GCC bug 105593). The pragma must precede the header's first inclusion,
// so this header is included before <immintrin.h> by every SIMD kernel file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace pagellm::kernels_internal::avx2 {

// Sum of 8 lanes: (l + l+4), then (+2), (+1) -- the tail of the 16-lane tree of HSum in
// simd_avx512.h, so HSum8(lo + hi) reproduces the AVX-512 reduction of the register [lo, hi].
static inline float HSum8(__m256 v) {
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}

// Lane mask for _mm256_maskload_ps covering the first n (0..8) lanes.
static inline __m256i TailMask8(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
}

static inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// 2^n for integral n in [-126, 127], as a float.
static inline __m256 Pow2(__m256 n) {
  const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}

// exp(x) for 8 lanes; same polynomial as the AVX-512 Exp. 2^n is applied as two factors
// 2^(n/2) so that overflow to +inf and gradual underflow come out of ordinary multiplies.
static inline __m256 Exp(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), _mm256_min_ps(_mm256_set1_ps(89.0f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256 n1 = _mm256_floor_ps(_mm256_mul_ps(n, _mm256_set1_ps(0.5f)));
  const __m256 n2 = _mm256_sub_ps(n, n1);
  return _mm256_mul_ps(_mm256_mul_ps(p, Pow2(n1)), Pow2(n2));
}

}  // namespace pagellm::kernels_internal::avx2
