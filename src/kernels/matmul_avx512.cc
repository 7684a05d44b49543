// AVX-512 MatMul for F32 / F16 / BF16 weights with fp32 activations and fp32 accumulation.
//
// Per output (row r, token t) the sum over k is split into chunks of kChunk (the last may be
// shorter). Within a chunk a 16-lane register accumulates lane j <- k = j (mod 16) with one FMA
// per 16 k (weights widened to fp32 in registers, exact for F16/BF16; the cols % 16 tail uses
// zero-filled masked loads) and is reduced by HSum's fixed tree into the chunk sum S_c; the
// output is S_0 + S_1 + ... added in chunk order. Tiles only decide how many outputs are in
// flight, never this sequence, so results are independent of batch, tiling and threads.
//
// The state between chunks is one float per output (kept in y), so prefill is blocked
// GotoBLAS-style: a block of rows is widened to fp32 and packed into a per-thread panel (L2);
// then for each k chunk, a tile of kT tokens' chunk of x is packed (L1) and the panel's row
// pairs stream past it (PanelTile: 2 rows x 12 tokens of accumulators, no conversions).
// Decode (few tokens) walks each tile of kRd rows through all chunks, streaming weights
// linearly from memory.
//
// BF16 weights on CPUs with AVX512-BF16 take the dot-product instruction instead (twice the
// work per instruction, as llama.cpp does): activations are rounded to bf16 (RNE) and
// vdpbf16ps accumulates lane j <- the element pairs (32s + 2j, 32s + 2j + 1), 32 k per step,
// in the same chunk/HSum order. Decode (TileBf16) and prefill (PanelTileBf16) both use it, so
// batch invariance holds; results differ from the fp32-activation levels by the bf16
// rounding of x.
#include "kernels/simd_avx512.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <type_traits>

#include "base/cpu_features.h"
#include "kernels/matmul_internal.h"
#include "pagellm/check.h"

namespace pagellm::kernels_internal::avx512 {
namespace {

constexpr int kRd = kAvx512FloatRowTile;    // rows per tile in the decode order
constexpr int kT = kAvx512FloatTokenTile;   // tokens per tile in the prefill order
constexpr int64_t kChunk = 512;             // k per chunk (multiple of 16)
constexpr int64_t kPanelBytes = 512 << 10;  // prefill: fp32 weight panel of a row block (L2)
constexpr int64_t kPanelCols = 2048;        // prefill: k range of a panel (multiple of kChunk)
constexpr int kDecodeMaxTokens = 4;         // up to this many tokens use the decode order
// Decode weight prefetch distance beyond the next row tile (see Tile).
constexpr int64_t kPrefetchBytes = 4096;

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

// Decode order: adds chunk [k0, k1) of R rows x T tokens into y[t * ys + r] (y = S_0 when
// k0 == 0). w: first row, ws bytes apart; x: first token, xs floats apart.
template <DType kType, int R, int T>
inline void Tile(const uint8_t* w, int64_t ws, const float* x, int64_t xs, int64_t k0, int64_t k1,
                 float* y, int64_t ys) {
  __m512 acc[R][T];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  // The R rows are one contiguous region; prefetch the next row tile's bytes at the pace this
  // tile consumes its own (R * 16 elements per step).
  const uint8_t* ahead = w + R * ws + kPrefetchBytes;
  int64_t k = k0;
  for (; k + 16 <= k1; k += 16) {
    __m512 wv[R];
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead + (k * R + 16 * r) * ElemBytes<kType>()),
                   _MM_HINT_T0);
      wv[r] = LoadW<kType>(w + r * ws, k);
    }
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_loadu_ps(x + t * xs + k);
#pragma GCC unroll 12
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (k < k1) {  // the cols % 16 tail, at the end of the last chunk
    const __mmask16 m = TailMask16(k1 - k);
    __m512 wv[R];
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) wv[r] = LoadWMasked<kType>(w + r * ws, k, m);
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * xs + k);
#pragma GCC unroll 12
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) {
      const float s = HSum(acc[r][t]);
      y[t * ys + r] = k0 == 0 ? s : y[t * ys + r] + s;
    }
  }
}

// True if BF16 weights take the vdpbf16ps path on this CPU.
inline bool UseBf16Dot() {
  static const bool on = GetCpuFeatures().avx512_bf16;
  return on;
}

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

// As Tile for BF16 weights with the dot-product scheme.
template <int R, int T>
inline void TileBf16(const uint8_t* w, int64_t ws, const float* x, int64_t xs, int64_t k0,
                     int64_t k1, float* y, int64_t ys) {
  __m512 acc[R][T];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  const uint8_t* ahead = w + R * ws + kPrefetchBytes;
  for (int64_t k = k0; k < k1; k += 32) {
    const int64_t n = std::min<int64_t>(32, k1 - k);
    __m512bh wv[R];
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead + (k * R + 32 * r) * 2), _MM_HINT_T0);
      wv[r] = LoadWBf16(w + r * ws, k, n);
    }
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) {
      const __m512bh xv = LoadXBf16(x + t * xs, k, n);
#pragma GCC unroll 12
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) {
      const float s = HSum(acc[r][t]);
      y[t * ys + r] = k0 == 0 ? s : y[t * ys + r] + s;
    }
  }
}

// Decode order: R rows starting at r, tokens [t0, t1) (at most kDecodeMaxTokens), all chunks.
template <DType kType, int R, int T>
void DecodeRows(const MatMulArgs& a, int64_t r, int64_t t0) {
  const WeightMatrix& w = *a.w;
  const int64_t K = w.cols;
  for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
    if (kType == DType::kBF16 && UseBf16Dot()) {
      TileBf16<R, T>(w.row(r), w.row_bytes(), a.x + t0 * K, K, k0, std::min(K, k0 + kChunk),
                     a.y + t0 * w.rows + r, w.rows);
    } else {
      Tile<kType, R, T>(w.row(r), w.row_bytes(), a.x + t0 * K, K, k0, std::min(K, k0 + kChunk),
                        a.y + t0 * w.rows + r, w.rows);
    }
  }
}

template <DType kType, int T>
void Decode(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0) {
  int64_t r = r0;
  for (; r + kRd <= r1; r += kRd) DecodeRows<kType, kRd, T>(a, r, t0);
  for (; r < r1; ++r) DecodeRows<kType, 1, T>(a, r, t0);
}

// Prefill micro-kernel: one k chunk of a row pair x T tokens from packed operands, the same
// per-output sequence as Tile (zero padding past k1 reproduces Tile's masked tail step).
// wp: [step][2][16] fp32, xp: [step][T][16] fp32. Rows >= valid are not stored.
template <int T>
inline void PanelTile(const float* wp, const float* xp, int64_t steps, bool first, int valid,
                      float* y, int64_t ys) {
  __m512 acc[2][T];
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
  for (int64_t s = 0; s < steps; ++s) {
    const __m512 w0 = _mm512_load_ps(wp + 32 * s);
    const __m512 w1 = _mm512_load_ps(wp + 32 * s + 16);
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_load_ps(xp + (s * T + t) * 16);
      acc[0][t] = _mm512_fmadd_ps(w0, xv, acc[0][t]);
      acc[1][t] = _mm512_fmadd_ps(w1, xv, acc[1][t]);
    }
  }
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < valid; ++r) {
      const float v = HSum(acc[r][t]);
      y[t * ys + r] = first ? v : y[t * ys + r] + v;
    }
  }
}

// As PanelTile for the BF16 dot-product scheme. wp: [step][2][32] bf16, xp: [step][T][32] bf16
// (steps of 32 k, zero-padded past k1 as TileBf16's masked last step).
template <int T>
inline void PanelTileBf16(const uint16_t* wp, const uint16_t* xp, int64_t steps, bool first,
                          int valid, float* y, int64_t ys) {
  __m512 acc[2][T];
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
  for (int64_t s = 0; s < steps; ++s) {
    const __m512bh w0 = (__m512bh)_mm512_load_si512(wp + 64 * s);
    const __m512bh w1 = (__m512bh)_mm512_load_si512(wp + 64 * s + 32);
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) {
      const __m512bh xv = (__m512bh)_mm512_load_si512(xp + (s * T + t) * 32);
      acc[0][t] = _mm512_dpbf16_ps(acc[0][t], w0, xv);
      acc[1][t] = _mm512_dpbf16_ps(acc[1][t], w1, xv);
    }
  }
#pragma GCC unroll 12
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < valid; ++r) {
      const float v = HSum(acc[r][t]);
      y[t * ys + r] = first ? v : y[t * ys + r] + v;
    }
  }
}

// Rows per prefill row block: their fp32 panel (kPanelCols wide) fills about half of L2.
inline int64_t PanelRows(int64_t K) {
  const int64_t cols = std::min(K, kPanelCols);
  const int64_t rows = kPanelBytes / (cols * static_cast<int64_t>(sizeof(float)));
  return std::clamp<int64_t>(rows / 2 * 2, 2, 256);
}

// Per-thread packing buffers of the prefill order.
struct PrefillScratch {
  float* panel = nullptr;                 // row block, widened: [pair][step][2][16]
  alignas(64) float x[kT * kChunk] = {};  // token tile's chunk: [step][T][16]
  ~PrefillScratch() { std::free(panel); }
};

PrefillScratch& GetPrefillScratch() {
  thread_local std::unique_ptr<PrefillScratch> s = [] {
    auto p = std::make_unique<PrefillScratch>();
    // PanelRows keeps rows * min(K, kPanelCols) * 4 <= kPanelBytes, plus a padding step a row.
    p->panel = static_cast<float*>(std::aligned_alloc(64, kPanelBytes + 256 * 64));
    CHECK(p->panel != nullptr) << "out of memory for the weight panel";
    return p;
  }();
  return *s;
}

// Packs rows [r0, r1) x k [k0, k1) widened to fp32 as [pair][step][2][16] (steps of 16 k),
// zero-padded (an odd last row's partner, k past k1). Each row's range (up to kPanelCols) is
// read front to back, which the hardware prefetcher streams well; the copy also removes the
// power-of-two row stride, which would crowd a chunk of every row into a few cache sets.
template <DType kType>
void PackWeights(const WeightMatrix& w, int64_t r0, int64_t r1, int64_t k0, int64_t k1,
                 float* out) {
  const int64_t K = k1 - k0;
  const int64_t steps = (K + 15) / 16;
  for (int64_t r = r0; r < r1 + ((r1 - r0) & 1); ++r) {
    float* dst = out + ((r - r0) / 2) * steps * 32 + ((r - r0) & 1) * 16;
    if (r >= r1) {
      for (int64_t s = 0; s < steps; ++s) _mm512_store_ps(dst + 32 * s, _mm512_setzero_ps());
      continue;
    }
    const uint8_t* row = w.row(r) + k0 * ElemBytes<kType>();
    int64_t s = 0;
    for (; 16 * s + 16 <= K; ++s) _mm512_store_ps(dst + 32 * s, LoadW<kType>(row, 16 * s));
    if (s < steps)
      _mm512_store_ps(dst + 32 * s, LoadWMasked<kType>(row, 16 * s, TailMask16(K - 16 * s)));
  }
}

// BF16 dot-product scheme: packs rows [r0, r1) x k [k0, k1) unconverted as
// [pair][step][2][32] bf16 (steps of 32 k), zero-padded like PackWeights.
void PackWeightsBf16(const WeightMatrix& w, int64_t r0, int64_t r1, int64_t k0, int64_t k1,
                     uint16_t* out) {
  const int64_t K = k1 - k0;
  const int64_t steps = (K + 31) / 32;
  for (int64_t r = r0; r < r1 + ((r1 - r0) & 1); ++r) {
    uint16_t* dst = out + ((r - r0) / 2) * steps * 64 + ((r - r0) & 1) * 32;
    for (int64_t s = 0; s < steps; ++s) {
      const __m512i v =
          r >= r1 ? _mm512_setzero_si512()
                  : (__m512i)LoadWBf16(w.row(r), k0 + 32 * s, std::min<int64_t>(32, K - 32 * s));
      _mm512_store_si512(dst + 64 * s, v);
    }
  }
}

// Prefill order, one k chunk [k0, k1) of one row block whose k range [p0, p1) is packed in
// panel: T tokens from t.
template <int T>
void PrefillTokens(const MatMulArgs& a, const float* panel, int64_t p0, int64_t p1, float* xp,
                   int64_t r0, int64_t r1, int64_t t, int64_t k0, int64_t k1) {
  const WeightMatrix& w = *a.w;
  const int64_t steps = (k1 - k0 + 15) / 16;
  const int64_t pair_floats = (p1 - p0 + 15) / 16 * 32;
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t k = k0 + 16 * s;
    const __mmask16 m = TailMask16(std::min<int64_t>(16, k1 - k));
    for (int i = 0; i < T; ++i) {
      _mm512_store_ps(xp + (s * T + i) * 16, _mm512_maskz_loadu_ps(m, a.x + (t + i) * w.cols + k));
    }
  }
  float* y = a.y + t * w.rows;
  for (int64_t r = r0; r < r1; r += 2) {
    const int valid = static_cast<int>(std::min<int64_t>(2, r1 - r));
    const float* wp = panel + ((r - r0) / 2) * pair_floats + (k0 - p0) * 2;
    PanelTile<T>(wp, xp, steps, k0 == 0, valid, y + r, w.rows);
  }
}

// As PrefillTokens for the BF16 dot-product scheme.
template <int T>
void PrefillTokensBf16(const MatMulArgs& a, const uint16_t* panel, int64_t p0, int64_t p1,
                       uint16_t* xp, int64_t r0, int64_t r1, int64_t t, int64_t k0, int64_t k1) {
  const WeightMatrix& w = *a.w;
  const int64_t steps = (k1 - k0 + 31) / 32;
  const int64_t pair_elems = (p1 - p0 + 31) / 32 * 64;
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t k = k0 + 32 * s;
    for (int i = 0; i < T; ++i) {
      _mm512_store_si512(xp + (s * T + i) * 32,
                         (__m512i)LoadXBf16(a.x + (t + i) * w.cols, k, k1 - k));
    }
  }
  float* y = a.y + t * w.rows;
  for (int64_t r = r0; r < r1; r += 2) {
    const int valid = static_cast<int>(std::min<int64_t>(2, r1 - r));
    const uint16_t* wp = panel + ((r - r0) / 2) * pair_elems + (k0 - p0) * 2;
    PanelTileBf16<T>(wp, xp, steps, k0 == 0, valid, y + r, w.rows);
  }
}

template <DType kType>
void Prefill(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const int64_t K = a.w->cols;
  PrefillScratch& scratch = GetPrefillScratch();
  const int64_t block_rows = PanelRows(K);
  for (int64_t rb = r0; rb < r1; rb += block_rows) {
    const int64_t re = std::min(r1, rb + block_rows);
    for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
      const int64_t k1 = std::min(K, k0 + kChunk);
      const int64_t p0 = k0 / kPanelCols * kPanelCols;
      const int64_t p1 = std::min(K, p0 + kPanelCols);
      const bool bf16_dot = kType == DType::kBF16 && UseBf16Dot();
      auto* panel16 = reinterpret_cast<uint16_t*>(scratch.panel);
      auto* x16 = reinterpret_cast<uint16_t*>(scratch.x);
      if (k0 == p0) {
        if (bf16_dot) {
          PackWeightsBf16(*a.w, rb, re, p0, p1, panel16);
        } else {
          PackWeights<kType>(*a.w, rb, re, p0, p1, scratch.panel);
        }
      }
      auto tokens = [&](auto tile, int64_t t) {
        if (bf16_dot) {
          PrefillTokensBf16<decltype(tile)::value>(a, panel16, p0, p1, x16, rb, re, t, k0, k1);
        } else {
          PrefillTokens<decltype(tile)::value>(a, scratch.panel, p0, p1, scratch.x, rb, re, t, k0,
                                               k1);
        }
      };
      int64_t t = t0;
      for (; t + kT <= t1; t += kT) tokens(std::integral_constant<int, kT>(), t);
      switch (t1 - t) {
        case 0:
          break;
        case 1:
          tokens(std::integral_constant<int, 1>(), t);
          break;
        case 2:
          tokens(std::integral_constant<int, 2>(), t);
          break;
        case 3:
          tokens(std::integral_constant<int, 3>(), t);
          break;
        case 4:
          tokens(std::integral_constant<int, 4>(), t);
          break;
        case 5:
          tokens(std::integral_constant<int, 5>(), t);
          break;
        case 6:
          tokens(std::integral_constant<int, 6>(), t);
          break;
        case 7:
          tokens(std::integral_constant<int, 7>(), t);
          break;
        case 8:
          tokens(std::integral_constant<int, 8>(), t);
          break;
        case 9:
          tokens(std::integral_constant<int, 9>(), t);
          break;
        case 10:
          tokens(std::integral_constant<int, 10>(), t);
          break;
        case 11:
          tokens(std::integral_constant<int, 11>(), t);
          break;
        default:
          CHECK(false) << "token tail " << (t1 - t);
      }
    }
  }
}

static_assert(kT == 12, "Prefill's tail switch covers token tails 1..11");

template <DType kType>
void Block(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  switch (t1 - t0) {
    case 1:
      Decode<kType, 1>(a, r0, r1, t0);
      return;
    case 2:
      Decode<kType, 2>(a, r0, r1, t0);
      return;
    case 3:
      Decode<kType, 3>(a, r0, r1, t0);
      return;
    case 4:
      Decode<kType, 4>(a, r0, r1, t0);
      return;
    default:
      Prefill<kType>(a, r0, r1, t0, t1);
  }
}

static_assert(kDecodeMaxTokens == 4, "Block's switch covers the decode order's token counts");

}  // namespace

void MatMulFloatBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  switch (a.w->dtype) {
    case DType::kF32:
      Block<DType::kF32>(a, r0, r1, t0, t1);
      break;
    case DType::kF16:
      Block<DType::kF16>(a, r0, r1, t0, t1);
      break;
    case DType::kBF16:
      Block<DType::kBF16>(a, r0, r1, t0, t1);
      break;
    default:
      CHECK(false) << "not a float weight type: " << DTypeName(a.w->dtype);
  }
}

}  // namespace pagellm::kernels_internal::avx512
