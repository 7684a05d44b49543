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
// GotoBLAS-style: a block of rows is widened to fp32 once per token block and packed into a
// per-thread panel (L2); then for each k chunk, a tile of kT tokens' chunk of x is packed (L1)
// and the panel streams past it. The default prefill (LanePrefill) puts 16 rows in the lanes
// of a register (panel transposed at packing time) and runs the 16 lane chains of the decode
// order one residue class at a time, so HSum's tree becomes vertical register adds and y is
// updated 16 rows at a time; its micro-tile is 32 rows x 12 tokens (24 accumulators, 2 weight
// loads and 12 broadcasts per 24 FMAs). BF16 dot products have the same rows-in-lanes prefill
// in matmul_bf16_lanes_avx512.cc. The older row-pair panel kernels (PanelTile, PanelTileBf16:
// lanes along k, one HSum per output and chunk) remain for A/B runs (PAGELLM_LANE_PREFILL=0).
// Decode (few tokens) walks each tile of kRd rows through all chunks, streaming weights linearly
// from memory.
//
// BF16 weights on CPUs with AVX512-BF16 take the dot-product instruction instead (twice the
// work per instruction, as llama.cpp does): activations are rounded to bf16 (RNE) and
// vdpbf16ps accumulates lane j <- the element pairs (32s + 2j, 32s + 2j + 1), 32 k per step,
// in the same chunk/HSum order. Decode (TileBf16) and prefill (PrefillBf16Lanes) both use it, so
// batch invariance holds; results differ from the fp32-activation levels by the bf16
// rounding of x.
#include "kernels/simd_avx512.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <type_traits>

#include "base/cpu_features.h"
#include "kernels/kernel_tuning.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_lanes_avx512.h"
#include "kernels/packed_weights.h"
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
const int64_t kPrefetchBytes = GetKernelTuning().row_prefetch_bytes;

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

// The rows-in-lanes prefill (LanePrefill) for fp32-FMA weights; PAGELLM_LANE_PREFILL=0 keeps
// the older row-pair panel kernel (A/B runs; both give the decode order's results bit for bit).
inline bool UseLanePrefill() {
  static const bool on = [] {
    const char* e = std::getenv("PAGELLM_LANE_PREFILL");
    return e == nullptr || e[0] != '0';
  }();
  return on;
}

// True if BF16 weights take the vdpbf16ps path on this CPU.
inline bool UseBf16Dot() {
  static const bool on = GetCpuFeatures().avx512_bf16;
  return on;
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

// PanelRows keeps rows * min(K, kPanelCols) * 4 <= kPanelBytes, plus a padding step a row.
constexpr int64_t kPrefillPanelBytes = kPanelBytes + 256 * 64;

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

// ---- Prefill for fp32-FMA weights (F32, F16, BF16 without AVX512-BF16), rows in lanes ----
//
// The decode order's lane j of an output's chunk sum is the fma chain over s = 0, 1, ... of
// w[k0 + 16s + j] * x[k0 + 16s + j], and the chunk sum is HSum's tree over the 16 lanes. The
// prefill computes exactly these numbers with rows in the lanes instead of k: for each
// residue j it runs the chain for 16 rows at once (P_j, one register per 16 rows x token,
// weights of 16 rows at one k from a transposed panel, x broadcast), and HSum's tree becomes
// vertical adds of whole registers, s1 = ((P0 + P8) + (P4 + P12)) + ... in HSum's pairing. So
// there is no horizontal reduction and no per-output scalar store: y is updated 16 rows at a
// time. Residues are visited in the tree's leaf order (0, 8, 4, 12, 2, 10, ...) so that at
// most 4 partial sums per register wait in a small stack, combined as soon as their partner
// is done (a binary counter).

constexpr int kRg = 2;  // 16-row register groups per micro-tile (32 rows)
constexpr int kGroupRows = 16 * kRg;
// Leaf order of HSum's tree: sums are paired as (j, j + 8), then (+4), (+2), (+1).
constexpr int kResidueOrder[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};

// Per-thread buffers of the rows-in-lanes prefill.
struct LanePrefillScratch {
  float* panel = nullptr;                      // see PackWeightsT
  alignas(64) float x[kT * kChunk] = {};       // token tile's chunk: [t][kChunk], zero padded
  alignas(64) float partial[4][kRg * kT][16];  // the tree's waiting partial sums
  ~LanePrefillScratch() { std::free(panel); }
};

constexpr int64_t kLanePanelBytes = kPanelBytes + (64 << 10);
// k range of a rows-in-lanes panel: narrower than kPanelCols so that a row block has more rows
// (256 at 512 columns) to share each token tile's chunk of x, which comes from L3 (1,024
// columns: 3% slower; 2,048: 10%).
constexpr int64_t kLanePanelCols = 512;
static_assert(kLanePanelCols % kChunk == 0);

// Rows per prefill row block (multiple of kGroupRows): the fp32 panel, kLanePanelCols wide,
// about half of L2.
inline int64_t LanePanelRows(int64_t K) {
  const int64_t cols = std::min(K, kLanePanelCols);
  const int64_t rows = kPanelBytes / (cols * static_cast<int64_t>(sizeof(float)));
  return std::clamp<int64_t>(rows / kGroupRows * kGroupRows, kGroupRows, 256);
}

// Panel of rows [r0, r1) (padded with zero rows to whole groups of 32) x k [p0, p1), widened
// to fp32: group g, chunk c (k from p0 + c * kChunk, steps_c steps of 16 k), residue j, step s
// holds the 32 rows' weights at k = p0 + c * kChunk + 16 s + j at
//   g * 32 * 16 * steps + c * 32 * kChunk + (j * steps_c + s) * 32,   steps = ceil((p1-p0)/16)
// (k past p1 is zero, as the decode order's masked last step).
template <DType kType>
void PackWeightsT(const WeightMatrix& w, int64_t r0, int64_t r1, int64_t p0, int64_t p1,
                  float* out) {
  const int64_t K = p1 - p0;
  const int64_t steps = (K + 15) / 16;
  const int64_t rows = (r1 - r0 + kGroupRows - 1) / kGroupRows * kGroupRows;
  // 16 rows at a time: each 16 x 16 block is loaded row-wise, transposed in registers and
  // stored as 16 aligned 64-byte halves of the residues' 32-row slots.
  for (int64_t rr = 0; rr < rows; rr += 16) {
    const uint8_t* row[16];
    for (int i = 0; i < 16; ++i) {
      const int64_t r = r0 + rr + i;
      row[i] = r < r1 ? w.row(r) + p0 * ElemBytes<kType>() : nullptr;
    }
    float* g = out + (rr / kGroupRows) * kGroupRows * 16 * steps + rr % kGroupRows;
    for (int64_t c = 0; kChunk * c < K; ++c) {
      const int64_t kc = kChunk * c;
      const int64_t steps_c = (std::min(kChunk, K - kc) + 15) / 16;
      float* dst = g + c * kGroupRows * kChunk;
      for (int64_t s = 0; s < steps_c; ++s) {
        const int64_t k = kc + 16 * s;
        __m512 v[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) {
          if (row[i] == nullptr) {
            v[i] = _mm512_setzero_ps();
          } else if (k + 16 <= K) {
            v[i] = LoadW<kType>(row[i], k);
          } else {
            v[i] = LoadWMasked<kType>(row[i], k, TailMask16(K - k));
          }
        }
        Transpose16(v);
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) _mm512_store_ps(dst + (j * steps_c + s) * kGroupRows, v[j]);
      }
    }
  }
}
static_assert(kChunk == 512, "PackWeightsT's chunk loop");

// True if the weights are F16 with a lane-layout copy (packed_weights.h), which decode
// (DecodeF16Lanes) and the prefill panels (PackWeightsFromLanes) read instead of the rows.
template <DType kType>
bool HasF16Lanes(const MatMulArgs& a) {
  return kType == DType::kF16 && a.w->packed != nullptr;
}

// As PackWeightsT for F16 weights with a lane-layout copy (packed_weights.h), whose 16-row
// groups already hold each k's rows side by side: the panel is a widening copy, no transpose.
// r0 is a multiple of 16 (a lane group); rows past r1 are left zero like PackWeightsT's.
void PackWeightsFromLanes(const WeightMatrix& w, int64_t r0, int64_t r1, int64_t p0, int64_t p1,
                          float* out) {
  CHECK_EQ(r0 % 16, 0);
  const F16LaneLayout pl = GetF16LaneLayout(w.rows, w.cols);
  const int64_t K = p1 - p0;
  const int64_t steps = (K + 15) / 16;
  const int64_t rows = (r1 - r0 + kGroupRows - 1) / kGroupRows * kGroupRows;
  for (int64_t rr = 0; rr < rows; rr += 16) {
    const bool in_range = r0 + rr < r1;
    const uint8_t* src = w.packed + (r0 + rr) / 16 * pl.group_bytes + p0 / 16 * kF16LaneStepBytes;
    float* g = out + (rr / kGroupRows) * kGroupRows * 16 * steps + rr % kGroupRows;
    for (int64_t c = 0; kChunk * c < K; ++c) {
      const int64_t kc = kChunk * c;
      const int64_t steps_c = (std::min(kChunk, K - kc) + 15) / 16;
      float* dst = g + c * kGroupRows * kChunk;
      for (int64_t s = 0; s < steps_c; ++s) {
        const uint8_t* step = src + (kc / 16 + s) * kF16LaneStepBytes;
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) {
          const __m512 v = in_range ? _mm512_cvtph_ps(_mm256_load_si256(
                                          reinterpret_cast<const __m256i*>(step + 32 * j)))
                                    : _mm512_setzero_ps();
          _mm512_store_ps(dst + (j * steps_c + s) * kGroupRows, v);
        }
      }
    }
  }
}

// One chunk of 32 rows (panel wp, the chunk's residue 0) x T tokens (xp: [t][kChunk]) with
// steps 16-k steps: adds the chunk sums into y (y = S_0 when first).
template <int T>
inline void LaneTile(const float* wp, const float* xp, int64_t steps, bool first, int valid,
                     float* y, int64_t ys, float (*partial)[kRg * kT][16]) {
  int depth = 0;  // partial sums waiting in the tree
  for (int n = 0; n < 16; ++n) {
    const int j = kResidueOrder[n];
    const float* w = wp + j * steps * kGroupRows;
    const float* x = xp + j;
    __m512 acc[kRg][T];
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
    for (int64_t s = 0; s < steps; ++s) {
      const __m512 w0 = _mm512_load_ps(w + s * kGroupRows);
      const __m512 w1 = _mm512_load_ps(w + s * kGroupRows + 16);
#pragma GCC unroll 12
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_set1_ps(x[t * kChunk + 16 * s]);
        acc[0][t] = _mm512_fmadd_ps(w0, xv, acc[0][t]);
        acc[1][t] = _mm512_fmadd_ps(w1, xv, acc[1][t]);
      }
    }
    LaneTreeStep<kRg, T, kT>(n, depth, acc, partial, first, valid, y, ys);
  }
}

// One k chunk [k0, k1) of the row block [r0, r1), whose k range [p0, p1) is packed in panel:
// T tokens from t.
template <int T>
void LanePrefillTokens(const MatMulArgs& a, const float* panel, int64_t p0, int64_t p1,
                       LanePrefillScratch& scratch, int64_t r0, int64_t r1, int64_t t,
                       int64_t t_end, int64_t k0, int64_t k1) {
  const WeightMatrix& w = *a.w;
  const int64_t steps = (k1 - k0 + 15) / 16;
  const int64_t panel_steps = (p1 - p0 + 15) / 16;
  for (int i = 0; i < T; ++i) {
    const float* src = a.x + (t + i) * w.cols + k0;
    float* dst = scratch.x + i * kChunk;
    for (int64_t s = 0; s < steps; ++s) {
      const __mmask16 m = TailMask16(std::min<int64_t>(16, k1 - k0 - 16 * s));
      _mm512_store_ps(dst + 16 * s, _mm512_maskz_loadu_ps(m, src + 16 * s));
    }
  }
  // The next token tile's chunk of x (its rows are K floats apart, in L3 or memory), into L2
  // while this tile runs.
  const int next_rows = static_cast<int>(std::clamp<int64_t>(t_end - (t + T), 0, T));
  NextTilePrefetch next(a.x + (t + T) * w.cols + k0, w.cols, next_rows, steps,
                        (r1 - r0 + kGroupRows - 1) / kGroupRows);
  float* y = a.y + t * w.rows;
  const int64_t c = (k0 - p0) / kChunk;
  for (int64_t r = r0; r < r1; r += kGroupRows) {
    next.BeforeGroup();
    const int valid = static_cast<int>(std::min<int64_t>(kGroupRows, r1 - r));
    const float* wp =
        panel + ((r - r0) / kGroupRows) * kGroupRows * 16 * panel_steps + c * kGroupRows * kChunk;
    LaneTile<T>(wp, scratch.x, steps, k0 == 0, valid, y + r, w.rows, scratch.partial);
  }
}

template <DType kType>
void LanePrefill(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const int64_t K = a.w->cols;
  LanePrefillScratch& scratch = ThreadScratch<LanePrefillScratch, kLanePanelBytes>();
  const int64_t block_rows = LanePanelRows(K);
  for (int64_t rb = r0; rb < r1; rb += block_rows) {
    const int64_t re = std::min(r1, rb + block_rows);
    for (int64_t p0 = 0; p0 < K; p0 += kLanePanelCols) {
      const int64_t p1 = std::min(K, p0 + kLanePanelCols);
      CHECK_LE((re - rb + kGroupRows - 1) / kGroupRows * kGroupRows * ((p1 - p0 + 15) / 16) * 16 *
                   static_cast<int64_t>(sizeof(float)),
               kLanePanelBytes);
      if (HasF16Lanes<kType>(a)) {
        PackWeightsFromLanes(*a.w, rb, re, p0, p1, scratch.panel);
      } else {
        PackWeightsT<kType>(*a.w, rb, re, p0, p1, scratch.panel);
      }
      for (int64_t k0 = p0; k0 < p1; k0 += kChunk) {
        const int64_t k1 = std::min(p1, k0 + kChunk);
        auto tokens = [&](auto tile, int64_t t) {
          LanePrefillTokens<decltype(tile)::value>(a, scratch.panel, p0, p1, scratch, rb, re, t, t1,
                                                   k0, k1);
        };
        ForTokenTiles(t0, t1, tokens);
      }
    }
  }
}

template <DType kType>
void Prefill(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  if (kType == DType::kBF16 && UseBf16Dot()) {
    if (UseLanePrefill()) {
      PrefillBf16Lanes(a, r0, r1, t0, t1);
      return;
    }
  } else if (UseLanePrefill() || HasF16Lanes<kType>(a)) {
    LanePrefill<kType>(a, r0, r1, t0, t1);
    return;
  }
  const int64_t K = a.w->cols;
  PrefillScratch& scratch = ThreadScratch<PrefillScratch, kPrefillPanelBytes>();
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
      ForTokenTiles(t0, t1, tokens);
    }
  }
}

template <DType kType>
void Block(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  if (t1 - t0 > kDecodeMaxTokens) {
    Prefill<kType>(a, r0, r1, t0, t1);
    return;
  }
  if (HasF16Lanes<kType>(a)) {
    DecodeF16Lanes(a, r0, r1, t0, t1);
    return;
  }
  WithTileSize<kDecodeMaxTokens>(
      t1 - t0, [&](auto tile) { Decode<kType, decltype(tile)::value>(a, r0, r1, t0); });
}

}  // namespace

template <DType kType>
void MatMulFloatBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  Block<kType>(a, r0, r1, t0, t1);
}
template void MatMulFloatBlock<DType::kF32>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
template void MatMulFloatBlock<DType::kF16>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
template void MatMulFloatBlock<DType::kBF16>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);

}  // namespace pagellm::kernels_internal::avx512
