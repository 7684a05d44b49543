// AVX-512 implementations of ops.h. Reductions use 16-lane accumulators, a zero-filled masked
// tail and HSum's fixed tree, so results depend only on the row's values.

#include "kernels/simd_avx512.h"

#include <limits>

#include "kernels/ops_internal.h"

namespace pagellm::kernels_internal::avx512 {
namespace {

void RmsNormRow(const float* x, const float* weight, int64_t dim, float eps, float* out) {
  __m512 acc = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= dim; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    acc = _mm512_fmadd_ps(v, v, acc);
  }
  if (j < dim) {
    const __m512 v = _mm512_maskz_loadu_ps(TailMask16(dim - j), x + j);
    acc = _mm512_fmadd_ps(v, v, acc);
  }
  const float scale = 1.0f / __builtin_sqrtf(HSum(acc) / static_cast<float>(dim) + eps);
  const __m512 s = _mm512_set1_ps(scale);
  for (j = 0; j + 16 <= dim; j += 16) {
    const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + j), s);
    _mm512_storeu_ps(out + j, _mm512_mul_ps(v, _mm512_loadu_ps(weight + j)));
  }
  if (j < dim) {
    const __mmask16 m = TailMask16(dim - j);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + j), s);
    _mm512_mask_storeu_ps(out + j, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, weight + j)));
  }
}

// silu(g) * u with e = exp(-|g|) <= 1 (no overflow): g * (g >= 0 ? 1 : e) / (1 + e) * u.
inline __m512 SiluMul16(__m512 g, __m512 u) {
  const __m512 e = Exp(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(g)));
  const __mmask16 neg = _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 num = _mm512_mul_ps(g, _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), neg, e));
  const __m512 silu = _mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
  return _mm512_mul_ps(silu, u);
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, SiluMul16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  }
  if (i < n) {
    const __mmask16 m = TailMask16(n - i);
    const __m512 r =
        SiluMul16(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i));
    _mm512_mask_storeu_ps(out + i, m, r);
  }
}

// gelu_tanh(g) * u as g · sigmoid(z) · u, z = g (kGeluC1 + kGeluC3 g²) (ops_internal.h).
inline __m512 GeluTanhMul16(__m512 g, __m512 u) {
  const __m512 z = _mm512_mul_ps(
      g, _mm512_fmadd_ps(_mm512_set1_ps(kGeluC3), _mm512_mul_ps(g, g), _mm512_set1_ps(kGeluC1)));
  const __m512 e = Exp(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(z)));
  const __mmask16 neg = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 num = _mm512_mul_ps(g, _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), neg, e));
  return _mm512_mul_ps(_mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, GeluTanhMul16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  }
  if (i < n) {
    const __mmask16 m = TailMask16(n - i);
    const __m512 r =
        GeluTanhMul16(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i));
    _mm512_mask_storeu_ps(out + i, m, r);
  }
}

void AddInPlace(float* x, const float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(x + i, _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  }
  if (i < n) {
    const __mmask16 m = TailMask16(n - i);
    _mm512_mask_storeu_ps(
        x + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

// Largest non-NaN value, or -inf. vmaxps returns its second operand when either is NaN.
float MaxIgnoringNaN(const float* x, int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m = ninf;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
  if (i < n) m = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, TailMask16(n - i), x + i), m);
  return _mm512_reduce_max_ps(m);
}

void Softmax(float* x, int64_t n) {
  const __m512 mx = _mm512_set1_ps(MaxIgnoringNaN(x, n));
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = Exp(_mm512_sub_ps(_mm512_loadu_ps(x + i), mx));
    _mm512_storeu_ps(x + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    const __mmask16 m = TailMask16(n - i);
    const __m512 e =
        _mm512_maskz_mov_ps(m, Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mx)));
    _mm512_mask_storeu_ps(x + i, m, e);
    acc = _mm512_add_ps(acc, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / HSum(acc));
  for (i = 0; i + 16 <= n; i += 16)
    _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
  if (i < n) {
    const __mmask16 m = TailMask16(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

int64_t ArgMax(const float* x, int64_t n) {
  const __m512 mx = _mm512_set1_ps(MaxIgnoringNaN(x, n));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), mx, _CMP_EQ_OQ);
    if (eq) return i + __builtin_ctz(eq);
  }
  if (i < n) {
    const __mmask16 m = TailMask16(n - i);
    const __mmask16 eq =
        _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, x + i), mx, _CMP_EQ_OQ);
    if (eq) return i + __builtin_ctz(eq);
  }
  return 0;  // all NaN
}

// NaN -> 0, clamp to +-65504, then vcvtps2ph rounding to nearest even: the scalar F32ToF16 of
// the same clamped value (which also rounds to nearest even, subnormals included).
inline __m256i SaturateToF16x16(__m512 v) {
  v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
  v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-kF16Max)), _mm512_set1_ps(kF16Max));
  return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

void SaturateToF16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        SaturateToF16x16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = TailMask16(n - i);
    _mm256_mask_storeu_epi16(out + i, m, SaturateToF16x16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

}  // namespace

const OpsTable kOps = {RmsNormRow, SiluMul, GeluTanhMul,  AddInPlace,
                       Softmax,    ArgMax,  SaturateToF16};

}  // namespace pagellm::kernels_internal::avx512
