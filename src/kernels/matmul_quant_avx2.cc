// AVX2 MatMul for Q8_0 / Q4_0 weights against Q8-quantized activations, and the AVX2 activation
// quantizer (paired-block layout of matmul_internal.h).
//
// Each 512-bit lane vector of the AVX-512 kernel is held here as two 256-bit halves (lo = lanes
// 0..7, hi = lanes 8..15) with their own accumulators; the lane dot products are computed with
// vpmaddubsw + vpmaddwd, which yield the same exact int32 values as vpdpbusd:
//   Q4_0: maddubs(nibbles, q) cannot saturate (15 * 127 * 2 < 2^15); the bias adds -8 * sum q.
//   Q8_0: maddubs(|w|, sign(q, w)) cannot saturate (128 * 127 * 2 < 2^15); no bias needed.
// The fp32 sequence per lane (cvt, scale = ws * dx, fma) and the final tree (lo + hi, then
// HSum8) match the AVX-512 kernel, so both levels give bitwise equal results.

#include "kernels/matmul_internal.h"
#include "kernels/simd_avx2.h"
#include "pagellm/check.h"

namespace pagellm::kernels_internal::avx2 {
namespace {

constexpr int kR = kAvx2QuantRowTile;
constexpr int kT = kAvx2QuantTokenTile;

// Weight side of one pair, in the activation layout. Q4_0: unsigned nibbles; Q8_0: signed
// bytes. s_lo / s_hi: per-lane block scales of the two halves.
struct WPair {
  __m256i lo, hi;
  __m256 s_lo, s_hi;
};

template <DType kType, bool kSingle>
inline WPair LoadPair(const uint8_t* b) {
  constexpr int64_t bb = DTypeBlockBytes(kType);
  WPair p;
  const uint32_t d1 = kSingle ? 0u : LoadU16(b + bb);
  const __m128 d01 = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(LoadU16(b) | (d1 << 16))));
  const __m256 d01x = _mm256_castps128_ps256(d01);
  if constexpr (kType == DType::kQ8_0) {
    p.s_lo = _mm256_permutevar8x32_ps(d01x, _mm256_set1_epi32(0));
    p.s_hi = _mm256_permutevar8x32_ps(d01x, _mm256_set1_epi32(1));
    p.lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
    p.hi = kSingle ? _mm256_setzero_si256()
                   : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + bb + 2));
  } else {
    p.s_lo = _mm256_permutevar8x32_ps(d01x, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
    p.s_hi = p.s_lo;
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
    const __m128i q1 = kSingle ? _mm_setzero_si128()
                               : _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + bb + 2));
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
    const __m256i mask = _mm256_set1_epi8(0x0f);
    p.lo = _mm256_and_si256(v, mask);
    p.hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
  }
  return p;
}

// Exact int32 lane dot products of one half (32 weight bytes x 32 activation bytes).
template <DType kType>
inline __m256i LaneDot(__m256i w, __m256i xq, const uint8_t* bias) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kType == DType::kQ8_0) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xq, w));
    return _mm256_madd_epi16(p16, ones);
  } else {
    const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(w, xq), ones);
    return _mm256_add_epi32(s, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias)));
  }
}

template <DType kType, int R, int T>
inline void AccumulatePair(const WPair (&w)[R], const uint8_t* x, int64_t xs, __m256 (&lo)[R][T],
                           __m256 (&hi)[R][T]) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const uint8_t* a = x + t * xs;
    const __m256i xlo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
    const __m256i xhi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 32));
    const __m256 dlo = _mm256_loadu_ps(reinterpret_cast<const float*>(a + 64));
    const __m256 dhi = _mm256_loadu_ps(reinterpret_cast<const float*>(a + 96));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256i ilo = LaneDot<kType>(w[r].lo, xlo, a + 128);
      const __m256i ihi = LaneDot<kType>(w[r].hi, xhi, a + 160);
      lo[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ilo), _mm256_mul_ps(w[r].s_lo, dlo), lo[r][t]);
      hi[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ihi), _mm256_mul_ps(w[r].s_hi, dhi), hi[r][t]);
    }
  }
}

template <DType kType, int R, int T>
void Tile(const uint8_t* w, int64_t ws, int64_t nb, const uint8_t* x, int64_t xs, float* y,
          int64_t ys) {
  constexpr int64_t bb = DTypeBlockBytes(kType);
  __m256 lo[R][T], hi[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) lo[r][t] = hi[r][t] = _mm256_setzero_ps();
  }
  const int64_t full_pairs = nb / 2;
  for (int64_t p = 0; p < full_pairs; ++p) {
    WPair wp[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wp[r] = LoadPair<kType, false>(w + r * ws + 2 * p * bb);
    AccumulatePair<kType, R, T>(wp, x + p * kQPairBytes, xs, lo, hi);
  }
  if (nb & 1) {
    WPair wp[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wp[r] = LoadPair<kType, true>(w + r * ws + 2 * full_pairs * bb);
    AccumulatePair<kType, R, T>(wp, x + full_pairs * kQPairBytes, xs, lo, hi);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) y[t * ys + r] = HSum8(_mm256_add_ps(lo[r][t], hi[r][t]));
  }
}

template <DType kType, int R>
void RowTile(const MatMulArgs& a, int64_t r, int64_t t0, int64_t t1) {
  const WeightMatrix& w = *a.w;
  const int64_t nb = w.cols / 32;
  const int64_t ws = w.row_bytes();
  const int64_t xs = QuantActsBytes(w.cols);
  const uint8_t* wr = w.row(r);
  int64_t t = t0;
  for (; t + kT <= t1; t += kT) {
    Tile<kType, R, kT>(wr, ws, nb, a.qx + t * xs, xs, a.y + t * w.rows + r, w.rows);
  }
  if (t < t1) Tile<kType, R, 1>(wr, ws, nb, a.qx + t * xs, xs, a.y + t * w.rows + r, w.rows);
}

static_assert(kT == 2, "RowTile's tail handles a single leftover token");

template <DType kType>
void Block(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  int64_t r = r0;
  for (; r + kR <= r1; r += kR) RowTile<kType, kR>(a, r, t0, t1);
  for (; r < r1; ++r) RowTile<kType, 1>(a, r, t0, t1);
}

// roundf(): round half away from zero (x - trunc(x) is exact in fp32).
inline __m256 RoundHalfAway(__m256 v) {
  const __m256 sign_mask = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_andnot_ps(sign_mask, _mm256_sub_ps(v, t));
  const __m256 away = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 step = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, sign_mask));
  return _mm256_add_ps(t, _mm256_and_ps(away, step));
}

// Quantizes 32 floats like QuantizeActBlock; returns them in element order.
inline __m256i QuantizeBlock(const float* x, float* d) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MAX));
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    amax = _mm256_max_ps(amax, _mm256_and_ps(v[i], abs_mask));
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float dd = _mm_cvtss_f32(m4) / 127.0f;
  const __m256 id = _mm256_set1_ps(dd != 0.0f ? 1.0f / dd : 0.0f);
  __m256i q[4];
  for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(RoundHalfAway(_mm256_mul_ps(v[i], id)));
  // packs work per 128-bit half; the permute restores element order.
  const __m256i q16a = _mm256_packs_epi32(q[0], q[1]);
  const __m256i q16b = _mm256_packs_epi32(q[2], q[3]);
  const __m256i q8 = _mm256_packs_epi16(q16a, q16b);
  *d = dd;
  return _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace

void MatMulQuantBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  switch (a.w->dtype) {
    case DType::kQ8_0: Block<DType::kQ8_0>(a, r0, r1, t0, t1); break;
    case DType::kQ4_0: Block<DType::kQ4_0>(a, r0, r1, t0, t1); break;
    default: CHECK(false) << "not a quantized weight type: " << DTypeName(a.w->dtype);
  }
}

void PrepareQuantActs(DType wtype, const float* x, int64_t cols, uint8_t* out) {
  const int64_t nb = cols / 32;
  const bool q8 = wtype == DType::kQ8_0;
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t p = 0; p < QuantActsPairs(cols); ++p) {
    float da, db = 0.0f;
    const __m256i a = QuantizeBlock(x + 64 * p, &da);
    const __m256i b = 2 * p + 1 < nb ? QuantizeBlock(x + 64 * p + 32, &db) : _mm256_setzero_si256();
    // Q8_0 layout [a b]; Q4_0 layout [a.lo b.lo a.hi b.hi] (16-byte halves).
    const __m256i first = q8 ? a : _mm256_permute2x128_si256(a, b, 0x20);
    const __m256i second = q8 ? b : _mm256_permute2x128_si256(a, b, 0x31);
    const __m256 va = _mm256_set1_ps(da), vb = _mm256_set1_ps(db);
    const __m256 dfirst = q8 ? va : _mm256_blend_ps(va, vb, 0xf0);
    const __m256 dsecond = q8 ? vb : dfirst;
    const int shift = q8 ? 7 : 3;
    auto bias = [&](__m256i qs) {
      const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, qs), ones16);
      return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(s, shift));
    };
    uint8_t* dst = out + p * kQPairBytes;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), first);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32), second);
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + 64), dfirst);
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + 96), dsecond);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 128), bias(first));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 160), bias(second));
  }
}

}  // namespace pagellm::kernels_internal::avx2
