// AVX-512 (VNNI) MatMul for Q8_0 / Q4_0 weights against Q8-quantized activations, and the
// activation quantizer that produces the paired-block layout of matmul_internal.h.
//
// Per output (row r, token t) and pair of 32-blocks p, with one 512-bit register per operand:
//   isum  = vpdpbusd(bias_t, wu_r, xq_t)        16 exact int32 lane dot products (4 bytes each)
//   scale = ws_r * dx_t                         per-lane block scales (fp16 weight d, fp32 act d)
//   acc   = fma(float(isum), scale, acc)        fp32, one FMA per lane per pair
// then HSum's fixed tree. wu is the unsigned weight operand: Q4_0 nibbles (0..15) or Q8_0 bytes
// xor 0x80; bias_t corrects for the offset (see matmul_internal.h). The tile shape only decides
// how many accumulators are live, never the per-output sequence (batch invariance).

#include "kernels/matmul_internal.h"
#include "kernels/simd_avx512.h"
#include "pagellm/check.h"

namespace pagellm::kernels_internal::avx512 {
namespace {

constexpr int kR = kAvx512QuantRowTile;
constexpr int kT = kAvx512QuantTokenTile;
// Software prefetch distance for weights. Rows are short (1-5 KiB), so a tile's R concurrent
// row streams end before the hardware prefetcher locks on. Instead the tile treats its R rows
// (contiguous in memory) as one linear region consumed at R pairs' bytes per step, and
// prefetches the same number of bytes this far ahead of that front, which runs on into the
// following row tiles.
constexpr int64_t kPrefetchBytes = 16384;

// Prefetches the cache lines of [p, p + bytes).
template <int64_t kBytes>
inline void PrefetchRange(const uint8_t* p) {
#pragma GCC unroll 16
  for (int64_t i = 0; i < (kBytes + 63) / 64; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(p + 64 * i), _MM_HINT_T0);
  }
}

// The weight side of one pair: unsigned bytes in the activation layout, and the per-lane scale.
struct WPair {
  __m512i q;
  __m512 s;
};

// Per-lane block index (0 or 1) of a pair, as vpermps indices into [d0, d1].
template <DType kType>
inline __m512i ScaleIndex() {
  if constexpr (kType == DType::kQ8_0) {
    return _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  } else {
    return _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);
  }
}

// b: first block of the pair. kSingle: only block 0 exists (odd block count); block 1's lanes
// then get zero weights' offset value and scale 0, and contribute fma(x, 0, acc) like the
// zero-padded activations expect.
template <DType kType, bool kSingle>
inline WPair LoadPair(const uint8_t* b) {
  constexpr int64_t bb = DTypeBlockBytes(kType);
  WPair p;
  const uint32_t d1 = kSingle ? 0u : LoadU16(b + bb);
  const __m128 d01 = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(LoadU16(b) | (d1 << 16))));
  p.s = _mm512_permutexvar_ps(ScaleIndex<kType>(), _mm512_castps128_ps512(d01));
  if constexpr (kType == DType::kQ8_0) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
    const __m256i hi = kSingle ? _mm256_setzero_si256()
                               : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + bb + 2));
    p.q = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                           _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
    const __m128i q1 = kSingle ? _mm_setzero_si128()
                               : _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + bb + 2));
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
    const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
    p.q = _mm512_and_si512(both, _mm512_set1_epi8(0x0f));
  }
  return p;
}

// acc[r][t] += one pair of R rows x T tokens. x: this pair of token 0, xs bytes between tokens.
template <int R, int T>
inline void AccumulatePair(const WPair (&w)[R], const uint8_t* x, int64_t xs,
                           __m512 (&acc)[R][T]) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const uint8_t* a = x + t * xs;
    const __m512i xq = _mm512_loadu_si512(a);
    const __m512 dx = _mm512_loadu_ps(reinterpret_cast<const float*>(a + 64));
    const __m512i bias = _mm512_loadu_si512(a + 128);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i isum = _mm512_dpbusd_epi32(bias, w[r].q, xq);
      const __m512 scale = _mm512_mul_ps(w[r].s, dx);
      acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[r][t]);
    }
  }
}

// y[t * ys + r] for r < R, t < T. w: first row (ws bytes apart, nb blocks each); x: prepared
// activations of token 0 (xs bytes apart).
template <DType kType, int R, int T>
void Tile(const uint8_t* w, int64_t ws, int64_t nb, const uint8_t* x, int64_t xs, float* y,
          int64_t ys) {
  constexpr int64_t bb = DTypeBlockBytes(kType);
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  const int64_t full_pairs = nb / 2;
  for (int64_t p = 0; p < full_pairs; ++p) {
    WPair wp[R];
    PrefetchRange<R * 2 * bb>(w + R * ws + p * (R * 2 * bb) + kPrefetchBytes);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wp[r] = LoadPair<kType, false>(w + r * ws + 2 * p * bb);
    AccumulatePair<R, T>(wp, x + p * kQPairBytes, xs, acc);
  }
  if (nb & 1) {
    WPair wp[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wp[r] = LoadPair<kType, true>(w + r * ws + 2 * full_pairs * bb);
    AccumulatePair<R, T>(wp, x + full_pairs * kQPairBytes, xs, acc);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) y[t * ys + r] = HSum(acc[r][t]);
  }
}

template <DType kType, int R>
void RowTile(const MatMulArgs& a, int64_t r, int64_t t0, int64_t t1) {
  const WeightMatrix& w = *a.w;
  const int64_t nb = w.cols / 32;
  const int64_t ws = w.row_bytes();
  const int64_t xs = QuantActsBytes(w.cols);
  const uint8_t* wr = w.row(r);
  auto at = [&](int64_t t) { return a.qx + t * xs; };
  auto yt = [&](int64_t t) { return a.y + t * w.rows + r; };
  int64_t t = t0;
  for (; t + kT <= t1; t += kT) Tile<kType, R, kT>(wr, ws, nb, at(t), xs, yt(t), w.rows);
  switch (t1 - t) {
    case 0: break;
    case 1: Tile<kType, R, 1>(wr, ws, nb, at(t), xs, yt(t), w.rows); break;
    case 2: Tile<kType, R, 2>(wr, ws, nb, at(t), xs, yt(t), w.rows); break;
    case 3: Tile<kType, R, 3>(wr, ws, nb, at(t), xs, yt(t), w.rows); break;
    default: CHECK(false) << "token tail " << (t1 - t);
  }
}

static_assert(kT == 4, "RowTile's tail switch covers token tails 1..3");

template <DType kType>
void Block(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  int64_t r = r0;
  for (; r + kR <= r1; r += kR) RowTile<kType, kR>(a, r, t0, t1);
  for (; r < r1; ++r) RowTile<kType, 1>(a, r, t0, t1);
}

// roundf(): round half away from zero (x - trunc(x) is exact in fp32).
inline __m512 RoundHalfAway(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
  const __mmask16 away = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 sign = _mm512_and_ps(v, _mm512_castsi512_ps(_mm512_set1_epi32(INT32_MIN)));
  return _mm512_mask_add_ps(t, away, t, _mm512_or_ps(_mm512_set1_ps(1.0f), sign));
}

// Quantizes 32 floats like QuantizeActBlock: lo = elements 0..15, hi = 16..31.
inline void QuantizeBlock(const float* x, __m128i* lo, __m128i* hi, float* d) {
  const __m512 v0 = _mm512_loadu_ps(x);
  const __m512 v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float dd = amax / 127.0f;
  const __m512 id = _mm512_set1_ps(dd != 0.0f ? 1.0f / dd : 0.0f);
  *lo = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(RoundHalfAway(_mm512_mul_ps(v0, id))));
  *hi = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(RoundHalfAway(_mm512_mul_ps(v1, id))));
  *d = dd;
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
  const __m512i ones = _mm512_set1_epi8(1);
  const __m512i index = q8 ? ScaleIndex<DType::kQ8_0>() : ScaleIndex<DType::kQ4_0>();
  for (int64_t p = 0; p < QuantActsPairs(cols); ++p) {
    __m128i a_lo, a_hi, b_lo = _mm_setzero_si128(), b_hi = _mm_setzero_si128();
    float da, db = 0.0f;
    QuantizeBlock(x + 64 * p, &a_lo, &a_hi, &da);
    if (2 * p + 1 < nb) QuantizeBlock(x + 64 * p + 32, &b_lo, &b_hi, &db);
    // Q8_0 layout [a_lo a_hi b_lo b_hi]; Q4_0 layout [a_lo b_lo a_hi b_hi].
    const __m256i first = q8 ? _mm256_setr_m128i(a_lo, a_hi) : _mm256_setr_m128i(a_lo, b_lo);
    const __m256i second = q8 ? _mm256_setr_m128i(b_lo, b_hi) : _mm256_setr_m128i(a_hi, b_hi);
    const __m512i qs = _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1);
    const __m512 dx =
        _mm512_permutexvar_ps(index, _mm512_castps128_ps512(_mm_setr_ps(da, db, 0.0f, 0.0f)));
    const __m512i lane_sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, qs);
    const __m512i bias = _mm512_sub_epi32(_mm512_setzero_si512(),
                                          _mm512_slli_epi32(lane_sum, q8 ? 7 : 3));
    uint8_t* dst = out + p * kQPairBytes;
    _mm512_storeu_si512(dst, qs);
    _mm512_storeu_ps(reinterpret_cast<float*>(dst + 64), dx);
    _mm512_storeu_si512(dst + 128, bias);
  }
}

}  // namespace pagellm::kernels_internal::avx512
