// AVX-512 decode (1..4 tokens) for F16 weights in the lane layout (packed_weights.h).
//
// The float kernels' order (matmul_avx512.cc): per output and 512 k chunk, lane j of a register
// accumulates k = j (mod 16) with one FMA per 16 k, HSum's tree pairs the lanes (j, j + 8), then
// (+4), (+2), (+1), and the chunk sums are added to y in chunk order. Here 16 rows sit in the
// lanes: chain j of all 16 rows is one register P_j (fp16 weights of the 16 rows at k widened
// to fp32, x[k] broadcast), and the tree is the same pairing of whole registers. Every output
// sees the identical sequence of roundings, so results equal the row-major kernels' bit for bit
// (and batch invariance holds across the two layouts).
//
// A group streams its 16 KiB chunks linearly (one stream per task, no 4 KiB row hops). With
// T tokens, J = 16 / T residues (J * T accumulators <= 16) are done per pass over a chunk; the
// later passes read the chunk from L1.
#include <algorithm>

#include "kernels/kernel_tuning.h"
#include "kernels/matmul_internal.h"
#include "kernels/packed_weights.h"
#include "kernels/simd_avx512.h"
#include "pagellm/check.h"

namespace pagellm::kernels_internal::avx512 {
namespace {

constexpr int64_t kChunk = 512;  // as matmul_avx512.cc (the order's chunk)
// Weights are prefetched this far ahead of the step being consumed, crossing into the next
// groups (a task's groups are contiguous), as the packed quantized decode does; but into L2
// only (prefetcht1), which keeps L1's miss buffers for the loads: F16 tg64 on a loaded bus,
// alternating with prefetcht0, +3.1%, +1.8%, +3.0% (Q4_0 showed no gain, so it keeps t0).
const int64_t kPrefetchBytes = GetKernelTuning().f16_prefetch_bytes;

// One chunk's steps [s0, s1) of a 16-row group for T tokens: leaves chain sums in p[t][j].
// full: steps before s_full have all 16 k inside the row; the rest use x = 0 past cols, as the
// row-major kernels' masked tail step does (its padded weights are zero in both layouts).
template <int T, int J>
inline void ChainSums(const uint8_t* group, int64_t s0, int64_t s1, int64_t cols, const float* x,
                      int64_t xs, __m512 (&p)[T][16]) {
  const int64_t s_full = std::min(s1, cols / 16);
#pragma GCC unroll 1
  for (int j0 = 0; j0 < 16; j0 += J) {
    __m512 acc[T][J];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
      for (int jj = 0; jj < J; ++jj) acc[t][jj] = _mm512_setzero_ps();
    }
    int64_t s = s0;
    for (; s < s_full; ++s) {
      const uint8_t* ws = group + s * kF16LaneStepBytes;
      if (kPrefetchBytes != 0 && j0 == 0) {
#pragma GCC unroll 8
        for (int line = 0; line < kF16LaneStepBytes / 64; ++line) {
          _mm_prefetch(reinterpret_cast<const char*>(ws + kPrefetchBytes + 64 * line), _MM_HINT_T1);
        }
      }
#pragma GCC unroll 16
      for (int jj = 0; jj < J; ++jj) {
        const __m512 w = _mm512_cvtph_ps(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(ws + 32 * (j0 + jj))));
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m512 xv = _mm512_set1_ps(x[t * xs + 16 * s + j0 + jj]);
          acc[t][jj] = _mm512_fmadd_ps(w, xv, acc[t][jj]);
        }
      }
    }
    for (; s < s1; ++s) {  // the last step of a row whose cols are not a multiple of 16
      const uint8_t* ws = group + s * kF16LaneStepBytes;
      for (int jj = 0; jj < J; ++jj) {
        const int64_t k = 16 * s + j0 + jj;
        const __m512 w = _mm512_cvtph_ps(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(ws + 32 * (j0 + jj))));
        for (int t = 0; t < T; ++t) {
          const __m512 xv = k < cols ? _mm512_set1_ps(x[t * xs + k]) : _mm512_setzero_ps();
          acc[t][jj] = _mm512_fmadd_ps(w, xv, acc[t][jj]);
        }
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
      for (int jj = 0; jj < J; ++jj) p[t][j0 + jj] = acc[t][jj];
    }
  }
}

// HSum's tree over the residues: ((P0 + P8) + (P4 + P12)) + ((P2 + P10) + (P6 + P14)) + ...
inline __m512 ResidueTree(__m512 (&p)[16]) {
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) p[j] = _mm512_add_ps(p[j], p[j + 8]);
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) p[j] = _mm512_add_ps(p[j], p[j + 4]);
  p[0] = _mm512_add_ps(p[0], p[2]);
  p[1] = _mm512_add_ps(p[1], p[3]);
  return _mm512_add_ps(p[0], p[1]);
}

template <int T>
void DecodeGroups(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0) {
  constexpr int J = 16 / (T == 3 ? 4 : T);
  const WeightMatrix& w = *a.w;
  const int64_t K = w.cols;
  const F16LaneLayout pl = GetF16LaneLayout(w.rows, K);
  const float* x = a.x + t0 * K;
  for (int64_t r = r0; r < r1; r += 16) {
    const uint8_t* group = w.packed + (r / 16) * pl.group_bytes;
    const __mmask16 m = TailMask16(std::min<int64_t>(16, r1 - r));
    float* y = a.y + t0 * w.rows + r;
    for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
      __m512 p[T][16];
      ChainSums<T, J>(group, k0 / 16, (std::min(K, k0 + kChunk) + 15) / 16, K, x, K, p);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m512 sum = ResidueTree(p[t]);
        float* yt = y + t * w.rows;
        _mm512_mask_storeu_ps(yt, m,
                              k0 == 0 ? sum : _mm512_add_ps(_mm512_maskz_loadu_ps(m, yt), sum));
      }
    }
  }
}

}  // namespace

void DecodeF16Lanes(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  CHECK_EQ(r0 % 16, 0) << "lane-layout row ranges start on a group";
  WithTileSize<4>(t1 - t0, [&](auto tile) { DecodeGroups<decltype(tile)::value>(a, r0, r1, t0); });
}

}  // namespace pagellm::kernels_internal::avx512
