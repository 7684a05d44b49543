// AVX2 MatMul for F32 / F16 / BF16 weights with fp32 activations and fp32 accumulation.
// Same scheme as matmul_avx512.cc with 8-lane accumulators: output (r, t) owns one register,
// lane j accumulates k = j (mod 8) in k order, the cols % 8 tail is zero-filled, and HSum8
// reduces in a fixed tree, whatever the tile shape (batch invariance).

#include "kernels/simd_avx2.h"

#include <cstring>

#include "kernels/matmul_internal.h"
#include "pagellm/check.h"

namespace pagellm::kernels_internal::avx2 {
namespace {

constexpr int kR = kAvx2FloatRowTile;
constexpr int kT = kAvx2FloatTokenTile;

template <DType kType>
constexpr int64_t ElemBytes() {
  return kType == DType::kF32 ? 4 : 2;
}

// 8 consecutive weights starting at element k of a row, widened to fp32.
template <DType kType>
inline __m256 LoadW(const uint8_t* row, int64_t k) {
  if constexpr (kType == DType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k));
    if constexpr (kType == DType::kF16) {
      return _mm256_cvtph_ps(h);
    } else {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
}

// The first n (< 8) weights from element k, zero-filled to 8 lanes.
template <DType kType>
inline __m256 LoadWPartial(const uint8_t* row, int64_t k, int64_t n) {
  alignas(32) uint8_t buf[32] = {};
  std::memcpy(buf, row + k * ElemBytes<kType>(), n * ElemBytes<kType>());
  return LoadW<kType>(buf, 0);
}

// y[t * ys + r] = sum_k W[r][k] * x[t][k] for r < R, t < T.
template <DType kType, int R, int T>
void Tile(const uint8_t* w, int64_t ws, const float* x, int64_t xs, int64_t K, float* y,
          int64_t ys) {
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = LoadW<kType>(w + r * ws, k);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * xs + k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (k < K) {
    const __m256i m = TailMask8(K - k);
    __m256 wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = LoadWPartial<kType>(w + r * ws, k, K - k);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_maskload_ps(x + t * xs + k, m);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) y[t * ys + r] = HSum8(acc[r][t]);
  }
}

template <DType kType, int R>
void RowTile(const MatMulArgs& a, int64_t r, int64_t t0, int64_t t1) {
  const WeightMatrix& w = *a.w;
  const int64_t K = w.cols;
  const int64_t ws = w.row_bytes();
  const uint8_t* wr = w.row(r);
  int64_t t = t0;
  for (; t + kT <= t1; t += kT) {
    Tile<kType, R, kT>(wr, ws, a.x + t * K, K, K, a.y + t * w.rows + r, w.rows);
  }
  if (t < t1) Tile<kType, R, 1>(wr, ws, a.x + t * K, K, K, a.y + t * w.rows + r, w.rows);
}

static_assert(kT == 2, "RowTile's tail handles a single leftover token");

template <DType kType>
void Block(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  int64_t r = r0;
  for (; r + kR <= r1; r += kR) RowTile<kType, kR>(a, r, t0, t1);
  for (; r < r1; ++r) RowTile<kType, 1>(a, r, t0, t1);
}

}  // namespace

template <DType kType>
void MatMulFloatBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  Block<kType>(a, r0, r1, t0, t1);
}
template void MatMulFloatBlock<DType::kF32>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
template void MatMulFloatBlock<DType::kF16>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
template void MatMulFloatBlock<DType::kBF16>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);

}  // namespace pagellm::kernels_internal::avx2
