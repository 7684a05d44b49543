// Pieces shared by the AVX-512 float kernels (matmul_avx512.cc) and the BF16 rows-in-lanes
// prefill (matmul_bf16_lanes_avx512.cc): bf16 operand loads, the 16 x 16 register transpose,
// the tree that turns 16 residue chains into chunk sums, the per-thread scratch and the
// prefetch of the next token tile. Include only from *_avx512.cc.
#pragma once

#include "kernels/simd_avx512.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <type_traits>

#include "kernels/matmul_internal.h"
#include "pagellm/check.h"

namespace pagellm::kernels_internal::avx512 {

// 32 activations from x[k..k+n) (n <= 32, zero past n) rounded to bf16 (RNE).
inline __m512bh LoadXBf16(const float* x, int64_t k, int64_t n) {
  if (n >= 32) {
    return _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + k + 16), _mm512_loadu_ps(x + k));
  }
  const __m512 lo = _mm512_maskz_loadu_ps(TailMask16(std::min<int64_t>(16, n)), x + k);
  const __m512 hi = _mm512_maskz_loadu_ps(TailMask16(std::max<int64_t>(0, n - 16)), x + k + 16);
  return _mm512_cvtne2ps_pbh(hi, lo);
}

// 32 bf16 weights from element k of a row (n <= 32 valid, zero past n).
inline __m512bh LoadWBf16(const uint8_t* row, int64_t k, int64_t n) {
  if (n >= 32) return (__m512bh)_mm512_loadu_si512(row + 2 * k);
  const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << n) - 1);
  return (__m512bh)_mm512_maskz_loadu_epi16(m, row + 2 * k);
}

// In-register transpose of a 16x16 block of 32-bit elements (fp32, or bf16 pairs seen as
// fp32 bits): on return v[j] lane i = old v[i] lane j.
inline void Transpose16(__m512 (&v)[16]) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
  // v[4q + c], 128-bit lane l: column 4l + c of rows 4q..4q+3.
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    v[4 * q] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
    v[4 * q + 1] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0xee);
    v[4 * q + 2] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
    v[4 * q + 3] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xee);
  }
  // t[c] / t[c + 4] (c < 4): lanes = columns c, c + 8 / c + 4, c + 12 of rows 0..3, 4..7;
  // t[8 + ...] the same for rows 8..15.
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    t[c] = _mm512_shuffle_f32x4(v[c], v[4 + c], 0x88);
    t[c + 4] = _mm512_shuffle_f32x4(v[c], v[4 + c], 0xdd);
    t[c + 8] = _mm512_shuffle_f32x4(v[8 + c], v[12 + c], 0x88);
    t[c + 12] = _mm512_shuffle_f32x4(v[8 + c], v[12 + c], 0xdd);
  }
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    v[c] = _mm512_shuffle_f32x4(t[c], t[c + 8], 0x88);
    v[c + 8] = _mm512_shuffle_f32x4(t[c], t[c + 8], 0xdd);
  }
}

// Leaf order of HSum's tree: sums are paired as (j, j + 8), then (+4), (+2), (+1). A
// rows-in-lanes kernel runs residue chain j for 16 rows per register and visits the residues
// in this order, so that the tree becomes vertical adds with at most 4 partial sums waiting.
inline constexpr int kResidueOrder[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};

// After the n-th leaf (kResidueOrder[n]) of a rows-in-lanes tile of G register groups (16 rows
// each) x T tokens, in acc: combines it with the waiting partial sums (leaf n closes one tree
// level per trailing 1 bit of n, the partner on the left: p_left + p_right, as HSum adds); if
// the tree is not complete (n < 15) pushes the result onto `partial` (depth entries in use),
// else adds the chunk sums into y (y = S_0 when first), rows >= valid not stored.
template <int G, int T, int kMaxT>
inline void LaneTreeStep(int n, int& depth, __m512 (&acc)[G][T], float (*partial)[G * kMaxT][16],
                         bool first, int valid, float* y, int64_t ys) {
  int levels = 0;
  for (int m = n; m & 1; m >>= 1) ++levels;
  for (int lv = 0; lv < levels; ++lv) {
    --depth;
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 2
      for (int g = 0; g < G; ++g) {
        acc[g][t] = _mm512_add_ps(_mm512_load_ps(partial[depth][g * T + t]), acc[g][t]);
      }
    }
  }
  if (n < 15) {
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 2
      for (int g = 0; g < G; ++g) _mm512_store_ps(partial[depth][g * T + t], acc[g][t]);
    }
    ++depth;
    return;
  }
  __mmask16 mask[G];
#pragma GCC unroll 2
  for (int g = 0; g < G; ++g) mask[g] = TailMask16(std::clamp(valid - 16 * g, 0, 16));
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) {
    float* yt = y + t * ys;
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {
      float* yg = yt + 16 * g;
      if (first) {
        _mm512_mask_storeu_ps(yg, mask[g], acc[g][t]);
      } else {
        _mm512_mask_storeu_ps(yg, mask[g],
                              _mm512_add_ps(_mm512_maskz_loadu_ps(mask[g], yg), acc[g][t]));
      }
    }
  }
}

// Runs tokens(std::integral_constant<int, kAvx512FloatTokenTile>(), t) over full token tiles
// from t0, then once with the tail size, so every tile size is a compile-time constant.
template <typename TokensFn>
inline void ForTokenTiles(int64_t t0, int64_t t1, TokensFn&& tokens) {
  constexpr int kT = kAvx512FloatTokenTile;
  int64_t t = t0;
  for (; t + kT <= t1; t += kT) tokens(std::integral_constant<int, kT>(), t);
  if (t < t1) WithTileSize<kT - 1>(t1 - t, [&](auto tile) { tokens(tile, t); });
}

// The calling thread's Scratch (a struct with a `panel` pointer member, freed by its
// destructor), made on the thread's first call with a 64-byte-aligned panel of kPanelBytes.
template <typename Scratch, int64_t kPanelBytes>
Scratch& ThreadScratch() {
  using Elem = std::remove_pointer_t<decltype(Scratch::panel)>;
  thread_local std::unique_ptr<Scratch> s = [] {
    auto p = std::make_unique<Scratch>();
    p->panel = static_cast<Elem*>(std::aligned_alloc(64, kPanelBytes));
    CHECK(p->panel != nullptr) << "out of memory for the weight panel";
    return p;
  }();
  return *s;
}

// Fetches the next token tile's chunk of x into L2 while a tile runs: `rows` rows (K floats
// apart, in L3 or memory) of lines_per_row 64-byte lines from x_next, a share of the lines
// before each of the tile's `groups` row groups (a burst of all of them overflows the miss
// queues and loses prefetches).
class NextTilePrefetch {
 public:
  NextTilePrefetch(const float* x_next, int64_t row_stride, int rows, int64_t lines_per_row,
                   int64_t groups)
      : x_next_(x_next),
        row_stride_(row_stride),
        lines_per_row_(lines_per_row),
        lines_(rows * lines_per_row),
        per_group_((lines_ + groups - 1) / groups) {}

  // Before each row group.
  void BeforeGroup() {
    for (const int64_t end = std::min(lines_, line_ + per_group_); line_ < end; ++line_) {
      const float* p =
          x_next_ + (line_ / lines_per_row_) * row_stride_ + 16 * (line_ % lines_per_row_);
      _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
    }
  }

 private:
  const float* x_next_;
  int64_t row_stride_, lines_per_row_, lines_, per_group_;
  int64_t line_ = 0;
};

}  // namespace pagellm::kernels_internal::avx512
