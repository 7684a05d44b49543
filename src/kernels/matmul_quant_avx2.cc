// AVX2 MatMul for Q8_0 / Q4_0 / Q4_Z / Q4_Z128 weights against Q8-quantized activations, and the
// AVX2 activation quantizer (layout in matmul_internal.h). The fallback for CPUs without AVX-512
// VNNI.
//
// Groups of 8 rows share one 256-bit register of per-row block sums: each row's block dot
// product is computed as 8 int32 lanes (vpmaddubsw + vpmaddwd; exact, no int16 saturation:
// Q4_0 codes are 0..15, and Q8_0 uses maddubs(|w|, sign(q, w)) with |w| <= 128), the 8 rows'
// lanes are reduced with horizontal adds, and the per-block fp32 step
//   acc = fma(float(isum), dw * dx, acc)
// runs with one lane per row -- the reference scheme, so results equal the other levels'. Q4_Z
// adds z * bias (bias = -sum q) per row lane, z from the same gather as the scale; Q4_Z128
// gathers them once per 4 blocks and scales by d_w once per 4 blocks (matmul_internal.h).
#include "kernels/simd_avx2.h"

#include <algorithm>

#include "kernels/matmul_internal.h"
#include "pagellm/check.h"

namespace pagellm::kernels_internal::avx2 {
namespace {

constexpr int kRows = 8;

inline int32_t LoadI32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline float LoadF32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// Int32 lane partial sums of one row's block against the block's 32 activation bytes. For Q4_0
// and Q4_Z the weights are the unsigned codes (the caller adds the activation bias term).
template <DType kType>
inline __m256i BlockLanes(const uint8_t* row, int64_t blk, __m256i xq) {
  constexpr int64_t bb = DTypeBlockBytes(kType);
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kType == DType::kQ8_0) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + blk * bb + 2));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xq, w)),
                             ones);
  } else {
    // Nibbles after the fp16 scale (Q4_0) or the scale and the zero point (Q4_Z); Q4_Z128:
    // sub-block blk % 4 of the 128-block blk / 4.
    const uint8_t* nibbles = kType == DType::kQ4_Z128 ? row + blk / 4 * bb + 3 + 16 * (blk % 4)
                             : kType == DType::kQ4_Z  ? row + blk * bb + 3
                                                      : row + blk * bb + 2;
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(nibbles));
    const __m128i nib = _mm_set1_epi8(0x0f);
    const __m256i u =
        _mm256_setr_m128i(_mm_and_si128(raw, nib), _mm_and_si128(_mm_srli_epi16(raw, 4), nib));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, xq), ones);
  }
}

// The 8 rows' fp16 scales and zero points: the low 16 bits of the dword at each row's block
// start, and (Q4_Z, Q4_Z128) bits 16..23.
inline __m256 HeadScales(__m256i head) {
  const __m256i d32 = _mm256_and_si256(head, _mm256_set1_epi32(0xffff));
  const __m256i d16 = _mm256_permute4x64_epi64(_mm256_packus_epi32(d32, d32), 0x08);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(d16));
}
inline __m256i HeadZeros(__m256i head) {
  return _mm256_and_si256(_mm256_srli_epi32(head, 16), _mm256_set1_epi32(0xff));
}

// Lane r = sum of the 8 lanes of p[r].
inline __m256i ReduceRows(const __m256i (&p)[kRows]) {
  const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]);
  const __m256i h23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]);
  const __m256i h67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23);  // [r0..3 lanes 0-3 | r0..3 lanes 4-7]
  const __m256i b = _mm256_hadd_epi32(h45, h67);  // same for rows 4..7
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

// One token against a group of 8 rows (rows[r]; offsets[r] = rows[r] - rows[0]).
template <DType kType>
void GroupToken(const uint8_t* const (&rows)[kRows], __m256i offsets, const QuantActsLayout& l,
                const uint8_t* act, int valid, float* y) {
  constexpr int64_t bb = DTypeBlockBytes(kType);
  __m256 acc = _mm256_setzero_ps();
  if constexpr (kType == DType::kQ4_Z128) {
    // One scale and zero point per 4 blocks; the fp32 steps of matmul_internal.h.
    for (int64_t g = 0; g < l.nb / 4; ++g) {
      const __m256i head =
          _mm256_i32gather_epi32(reinterpret_cast<const int*>(rows[0] + g * bb), offsets, 1);
      const __m256i z = HeadZeros(head);
      __m256 f = _mm256_setzero_ps();
      for (int j = 0; j < 4; ++j) {
        const int64_t blk = 4 * g + j;
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act + 32 * blk));
        __m256i p[kRows];
#pragma GCC unroll 8
        for (int r = 0; r < kRows; ++r) p[r] = BlockLanes<kType>(rows[r], blk, xq);
        const __m256i bias = _mm256_set1_epi32(LoadI32(act + l.bias_offset + 4 * blk));
        const __m256i isum = _mm256_add_epi32(ReduceRows(p), _mm256_mullo_epi32(z, bias));
        const __m256 dx = _mm256_set1_ps(LoadF32(act + l.dx_offset + 4 * blk));
        f = j == 0 ? _mm256_mul_ps(_mm256_cvtepi32_ps(isum), dx)
                   : _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dx, f);
      }
      acc = _mm256_fmadd_ps(f, HeadScales(head), acc);
    }
    _mm256_maskstore_ps(y, TailMask8(valid), acc);
    return;
  }
  for (int64_t blk = 0; blk < l.nb; ++blk) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act + 32 * blk));
    __m256i p[kRows];
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) p[r] = BlockLanes<kType>(rows[r], blk, xq);
    __m256i isum = ReduceRows(p);
    // Scales: the low 16 bits of the dword at each row's block start (Q4_Z: bits 16..23 are
    // the zero point).
    const __m256i head =
        _mm256_i32gather_epi32(reinterpret_cast<const int*>(rows[0] + blk * bb), offsets, 1);
    const __m256i bias = _mm256_set1_epi32(LoadI32(act + l.bias_offset + 4 * blk));
    if constexpr (kType == DType::kQ4_0) {
      isum = _mm256_add_epi32(isum, bias);
    } else if constexpr (kType == DType::kQ4_Z) {
      isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(HeadZeros(head), bias));
    }
    const __m256 dw = HeadScales(head);
    const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(LoadF32(act + l.dx_offset + 4 * blk)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc);
  }
  _mm256_maskstore_ps(y, TailMask8(valid), acc);
}

template <DType kType>
void Block(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const WeightMatrix& w = *a.w;
  const QuantActsLayout l = GetQuantActsLayout(w.cols);
  for (int64_t r = r0; r < r1; r += kRows) {
    const int valid = static_cast<int>(std::min<int64_t>(kRows, r1 - r));
    const uint8_t* rows[kRows];
    alignas(32) int32_t off[kRows];
    for (int i = 0; i < kRows; ++i) {
      rows[i] = w.row(r + std::min(i, valid - 1));
      off[i] = static_cast<int32_t>(rows[i] - rows[0]);
    }
    const __m256i offsets = _mm256_load_si256(reinterpret_cast<const __m256i*>(off));
    for (int64_t t = t0; t < t1; ++t) {
      GroupToken<kType>(rows, offsets, l, a.qx + t * l.bytes, valid, a.y + t * w.rows + r);
    }
  }
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

template <DType kType>
void MatMulQuantBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  Block<kType>(a, r0, r1, t0, t1);
}
template void MatMulQuantBlock<DType::kQ8_0>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
template void MatMulQuantBlock<DType::kQ4_0>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
template void MatMulQuantBlock<DType::kQ4_Z>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
template void MatMulQuantBlock<DType::kQ4_Z128>(const MatMulArgs&, int64_t, int64_t, int64_t,
                                                int64_t);

void PrepareQuantActs(int32_t c, const float* x, int64_t cols, uint8_t* out) {
  const QuantActsLayout l = GetQuantActsLayout(cols);
  // Zero padding first (odd last block, scale/bias pads, tail to 64 bytes).
  std::memset(out + l.dx_offset - 32, 0, l.bytes - (l.dx_offset - 32));
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < l.nb; ++b) {
    float d;
    const __m256i q = QuantizeBlock(x + 32 * b, &d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * b), q);
    const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    const int32_t bias = -c * _mm_cvtsi128_si32(s4);
    std::memcpy(out + l.dx_offset + 4 * b, &d, 4);
    std::memcpy(out + l.bias_offset + 4 * b, &bias, 4);
  }
}

}  // namespace pagellm::kernels_internal::avx2
