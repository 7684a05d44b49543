// AVX2 implementations of ops.h. Reductions use 8-lane accumulators, a zero-filled tail and
// HSum8's fixed tree, so results depend only on the row's values.

#include "kernels/simd_avx2.h"

#include <limits>

#include "kernels/ops_internal.h"

namespace pagellm::kernels_internal::avx2 {
namespace {

// The n (< 8) floats at p, zero-filled.
inline __m256 LoadPartial(const float* p, int64_t n) {
  return _mm256_maskload_ps(p, TailMask8(n));
}
inline void StorePartial(float* p, int64_t n, __m256 v) {
  _mm256_maskstore_ps(p, TailMask8(n), v);
}

void RmsNormRow(const float* x, const float* weight, int64_t dim, float eps, float* out) {
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= dim; j += 8) {
    const __m256 v = _mm256_loadu_ps(x + j);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  if (j < dim) {
    const __m256 v = LoadPartial(x + j, dim - j);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  const float scale = 1.0f / __builtin_sqrtf(HSum8(acc) / static_cast<float>(dim) + eps);
  const __m256 s = _mm256_set1_ps(scale);
  for (j = 0; j + 8 <= dim; j += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j), s);
    _mm256_storeu_ps(out + j, _mm256_mul_ps(v, _mm256_loadu_ps(weight + j)));
  }
  if (j < dim) {
    const __m256 v = _mm256_mul_ps(LoadPartial(x + j, dim - j), s);
    StorePartial(out + j, dim - j, _mm256_mul_ps(v, LoadPartial(weight + j, dim - j)));
  }
}

// silu(g) * u with e = exp(-|g|) <= 1 (no overflow): g * (g >= 0 ? 1 : e) / (1 + e) * u.
inline __m256 SiluMul8(__m256 g, __m256 u) {
  const __m256 abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), g);
  const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), abs));
  const __m256 neg = _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 num = _mm256_mul_ps(g, _mm256_blendv_ps(_mm256_set1_ps(1.0f), e, neg));
  const __m256 silu = _mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  return _mm256_mul_ps(silu, u);
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, SiluMul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  }
  if (i < n) {
    StorePartial(out + i, n - i,
                 SiluMul8(LoadPartial(gate + i, n - i), LoadPartial(up + i, n - i)));
  }
}

// gelu_tanh(g) * u as g · sigmoid(z) · u, z = g (kGeluC1 + kGeluC3 g²) (ops_internal.h).
inline __m256 GeluTanhMul8(__m256 g, __m256 u) {
  const __m256 z = _mm256_mul_ps(
      g, _mm256_fmadd_ps(_mm256_set1_ps(kGeluC3), _mm256_mul_ps(g, g), _mm256_set1_ps(kGeluC1)));
  const __m256 abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
  const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), abs));
  const __m256 neg = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 num = _mm256_mul_ps(g, _mm256_blendv_ps(_mm256_set1_ps(1.0f), e, neg));
  return _mm256_mul_ps(_mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, GeluTanhMul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  }
  if (i < n) {
    StorePartial(out + i, n - i,
                 GeluTanhMul8(LoadPartial(gate + i, n - i), LoadPartial(up + i, n - i)));
  }
}

void AddInPlace(float* x, const float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) x[i] += y[i];
}

// Largest non-NaN value, or -inf. vmaxps returns its second operand when either is NaN.
float MaxIgnoringNaN(const float* x, int64_t n) {
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  float r = _mm_cvtss_f32(m4);
  for (; i < n; ++i) r = x[i] > r ? x[i] : r;
  return r;
}

void Softmax(float* x, int64_t n) {
  const __m256 mx = _mm256_set1_ps(MaxIgnoringNaN(x, n));
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), mx));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (i < n) {
    const __m256i m = TailMask8(n - i);
    const __m256 e =
        _mm256_and_ps(_mm256_castsi256_ps(m), Exp(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), mx)));
    _mm256_maskstore_ps(x + i, m, e);
    acc = _mm256_add_ps(acc, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / HSum8(acc));
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  for (; i < n; ++i) x[i] *= _mm256_cvtss_f32(inv);
}

int64_t ArgMax(const float* x, int64_t n) {
  const float m = MaxIgnoringNaN(x, n);
  const __m256 mx = _mm256_set1_ps(m);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), mx, _CMP_EQ_OQ));
    if (eq) return i + __builtin_ctz(eq);
  }
  for (; i < n; ++i) {
    if (x[i] == m) return i;
  }
  return 0;  // all NaN
}

// NaN -> 0, clamp to +-65504, vcvtps2ph rounding to nearest even (see the AVX-512 version).
inline __m128i SaturateToF16x8(__m256 v) {
  v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
  v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-kF16Max)), _mm256_set1_ps(kF16Max));
  return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

void SaturateToF16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), SaturateToF16x8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    alignas(16) uint16_t tail[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(tail), SaturateToF16x8(LoadPartial(x + i, n - i)));
    for (int64_t j = 0; j < n - i; ++j) out[i + j] = tail[j];
  }
}

}  // namespace

const OpsTable kOps = {RmsNormRow, SiluMul, GeluTanhMul,  AddInPlace,
                       Softmax,    ArgMax,  SaturateToF16};

}  // namespace pagellm::kernels_internal::avx2
