// AVX-512 MatMul for F32 / F16 / BF16 weights with fp32 activations and fp32 accumulation.
//
// Dot-product formulation: output (row r, token t) owns one 16-lane accumulator; k advances
// 16 elements at a time (weights widened to fp32 in registers, exact for F16/BF16), lane j
// accumulates elements k = j (mod 16) with one FMA each, the cols % 16 tail uses masked
// (zero-filled) loads, and HSum reduces in a fixed tree. A tile of R rows x T tokens only
// keeps R*T such accumulators live at once, loading each weight vector once for T tokens and
// each activation vector once for R rows; the per-element sequence never changes, so results
// are independent of the tiling (batch invariance).

#include "kernels/matmul_internal.h"
#include "kernels/simd_avx512.h"
#include "pagellm/check.h"

namespace pagellm::kernels_internal::avx512 {
namespace {

constexpr int kR = kAvx512FloatRowTile;
constexpr int kT = kAvx512FloatTokenTile;
// Software prefetch distance along each weight row (rows are 4-32 KiB): a little help for the
// hardware stream prefetcher, which tracks R concurrent row streams per thread.
constexpr int64_t kPrefetchRowBytes = 1024;

template <DType kType>
constexpr int64_t ElemBytes() {
  return kType == DType::kF32 ? 4 : 2;
}

// 16 consecutive weights starting at element k of a row, widened to fp32.
template <DType kType>
inline __m512 LoadW(const uint8_t* row, int64_t k) {
  if constexpr (kType == DType::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k));
    if constexpr (kType == DType::kF16) {
      return _mm512_cvtph_ps(h);
    } else {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
  }
}

// As LoadW for the lanes in m; other lanes are 0.
template <DType kType>
inline __m512 LoadWMasked(const uint8_t* row, int64_t k, __mmask16 m) {
  if constexpr (kType == DType::kF32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, row + 2 * k);
    if constexpr (kType == DType::kF16) {
      return _mm512_cvtph_ps(h);
    } else {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
  }
}

// y[t * ys + r] = sum_k W[r][k] * x[t][k] for r < R, t < T.
// w: first row, ws bytes apart; x: first token, xs floats apart; K = cols.
template <DType kType, int R, int T>
void Tile(const uint8_t* w, int64_t ws, const float* x, int64_t xs, int64_t K, float* y,
          int64_t ys) {
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const uint8_t* p = w + r * ws + k * ElemBytes<kType>();
      _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchRowBytes), _MM_HINT_T0);
      wv[r] = LoadW<kType>(w + r * ws, k);
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_loadu_ps(x + t * xs + k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (k < K) {
    const __mmask16 m = TailMask16(K - k);
    __m512 wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = LoadWMasked<kType>(w + r * ws, k, m);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * xs + k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) y[t * ys + r] = HSum(acc[r][t]);
  }
}

// All tokens [t0, t1) against R rows starting at r.
template <DType kType, int R>
void RowTile(const MatMulArgs& a, int64_t r, int64_t t0, int64_t t1) {
  const WeightMatrix& w = *a.w;
  const int64_t K = w.cols;
  const int64_t ws = w.row_bytes();
  const uint8_t* wr = w.row(r);
  auto at = [&](int64_t t) { return a.x + t * K; };
  auto yt = [&](int64_t t) { return a.y + t * w.rows + r; };
  int64_t t = t0;
  for (; t + kT <= t1; t += kT) Tile<kType, R, kT>(wr, ws, at(t), K, K, yt(t), w.rows);
  switch (t1 - t) {
    case 0: break;
    case 1: Tile<kType, R, 1>(wr, ws, at(t), K, K, yt(t), w.rows); break;
    case 2: Tile<kType, R, 2>(wr, ws, at(t), K, K, yt(t), w.rows); break;
    case 3: Tile<kType, R, 3>(wr, ws, at(t), K, K, yt(t), w.rows); break;
    case 4: Tile<kType, R, 4>(wr, ws, at(t), K, K, yt(t), w.rows); break;
    case 5: Tile<kType, R, 5>(wr, ws, at(t), K, K, yt(t), w.rows); break;
    default: CHECK(false) << "token tail " << (t1 - t);
  }
}

template <DType kType>
void Block(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  int64_t r = r0;
  for (; r + kR <= r1; r += kR) RowTile<kType, kR>(a, r, t0, t1);
  for (; r < r1; ++r) RowTile<kType, 1>(a, r, t0, t1);
}

static_assert(kT == 6, "RowTile's tail switch covers token tails 1..5");

}  // namespace

void MatMulFloatBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  switch (a.w->dtype) {
    case DType::kF32: Block<DType::kF32>(a, r0, r1, t0, t1); break;
    case DType::kF16: Block<DType::kF16>(a, r0, r1, t0, t1); break;
    case DType::kBF16: Block<DType::kBF16>(a, r0, r1, t0, t1); break;
    default: CHECK(false) << "not a float weight type: " << DTypeName(a.w->dtype);
  }
}

}  // namespace pagellm::kernels_internal::avx512
