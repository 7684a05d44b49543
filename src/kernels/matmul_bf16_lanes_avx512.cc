// AVX512-BF16 prefill for BF16 weights with the rows in the lanes (more than 4 tokens).
//
// The decode order (matmul_avx512.cc, TileBf16): per output and 512-k chunk, lane j of one
// register accumulates vdpbf16ps over steps s of 32 k, each adding the element pair
// (32s + 2j, 32s + 2j + 1) of the row times the same pair of x rounded to bf16; HSum's tree
// pairs the lanes (j, j + 8), (+4), (+2), (+1) into the chunk sum, and chunk sums are added to
// y in chunk order. The row-pair panel kernel that did this for prefill (PanelTileBf16) spends
// a horizontal sum per output and chunk: on Zen 4, with T = 12 tokens, 24 HSums of ~8 shuffle
// and add instructions beside 384 vdpbf16ps per chunk, on the same pipes.
//
// Here 16 rows sit in the lanes instead: register P_j of a 16-row group holds chain j of the
// 16 rows (weights: the 16 rows' pair j of the step, a transposed panel; x: pair j broadcast as
// one 32-bit element), and the tree is the same pairing of whole registers (LaneTreeStep), so
// every output sees the identical sequence of roundings as the decode order, bit for bit
// (batch invariance holds between the two). Micro-tile: 32 rows x 12 tokens, 24 accumulators,
// 2 weight loads and 12 broadcasts per 24 vdpbf16ps; no horizontal reduction.
//
// The panel is packed from the row-major weights once per row block and 512-k range: 16 rows x
// 32 k are loaded row-wise (16 bf16 pairs per row, one register), transposed as 32-bit
// elements (Transpose16) and stored as the residues' slots.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/matmul_internal.h"
#include "kernels/matmul_lanes_avx512.h"
#include "pagellm/check.h"

namespace pagellm::kernels_internal::avx512 {
namespace {

constexpr int kT = kAvx512FloatTokenTile;  // tokens per tile (12)
constexpr int kRg = 2;                     // 16-row register groups per micro-tile
constexpr int kGroupRows = 16 * kRg;       // 32 rows
constexpr int64_t kChunk = 512;            // k per chunk: the decode order's (matmul_avx512.cc)
constexpr int64_t kStep = 32;              // k per vdpbf16ps step
constexpr int64_t kStepsPerChunk = kChunk / kStep;
// Elements (bf16) of one (residue, step) slot of a group: 32 rows x one pair.
constexpr int64_t kSlotElems = kGroupRows * 2;
// k range of a panel: one chunk, so that a row block has many rows (up to kMaxPanelRows) to
// share each token tile's chunk of x (as the fp32 lane prefill, matmul_avx512.cc).
constexpr int64_t kPanelCols = kChunk;
// 512 rows x 512 k x 2 bytes: 512 KiB, about half of a Zen 4 / Zen 5 L2.
constexpr int64_t kMaxPanelRows = 512;
constexpr int64_t kPanelBytes = kMaxPanelRows * kPanelCols * 2;

struct Scratch {
  uint16_t* panel = nullptr;                   // see PackPanel
  alignas(64) uint16_t x[kT * kChunk] = {};    // token tile's chunk, bf16: [t][kChunk]
  alignas(64) float partial[4][kRg * kT][16];  // the tree's waiting partial sums
  ~Scratch() { std::free(panel); }
};

// Panel of rows [r0, r1) (padded with zero rows to whole groups of 32) x k [p0, p1)
// (p1 - p0 <= kChunk): group g, residue j, step s holds the 32 rows' pairs at
// k = p0 + 32 s + 2 j, + 1 at element offset
//   g * 32 * 32 * steps + (j * steps + s) * 64,   steps = ceil((p1 - p0) / 32)
// (rows 0-15 of the group in the first 64 bytes, 16-31 in the next; k past p1 is zero, as the
// decode order's masked last step).
void PackPanel(const WeightMatrix& w, int64_t r0, int64_t r1, int64_t p0, int64_t p1,
               uint16_t* out) {
  const int64_t K = p1 - p0;
  const int64_t steps = (K + kStep - 1) / kStep;
  const int64_t rows = (r1 - r0 + kGroupRows - 1) / kGroupRows * kGroupRows;
  for (int64_t rr = 0; rr < rows; rr += 16) {
    const uint8_t* row[16];
    for (int i = 0; i < 16; ++i) {
      const int64_t r = r0 + rr + i;
      row[i] = r < r1 ? w.row(r) + 2 * p0 : nullptr;
    }
    uint16_t* g = out + (rr / kGroupRows) * kGroupRows * kStep * steps + (rr % kGroupRows) * 2;
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t k = kStep * s;
      const int64_t n = std::min(kStep, K - k);
      __m512 v[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        v[i] = row[i] == nullptr ? _mm512_setzero_ps()
                                 : _mm512_castsi512_ps((__m512i)LoadWBf16(row[i], k, n));
      }
      Transpose16(v);
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        _mm512_store_ps(reinterpret_cast<float*>(g + (j * steps + s) * kSlotElems), v[j]);
      }
    }
  }
}

// One chunk of 32 rows (wp: the group's panel) x T tokens (xp: [t][kChunk] bf16) in `steps`
// steps of 32 k: adds the chunk sums into y (y = S_0 when first).
template <int T>
inline void Tile(const uint16_t* wp, const uint16_t* xp, int64_t steps, bool first, int valid,
                 float* y, int64_t ys, float (*partial)[kRg * kT][16]) {
  int depth = 0;  // partial sums waiting in the tree
  for (int n = 0; n < 16; ++n) {
    const int j = kResidueOrder[n];
    const uint16_t* w = wp + j * steps * kSlotElems;
    const uint16_t* x = xp + 2 * j;
    __m512 acc[kRg][T];
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
    for (int64_t s = 0; s < steps; ++s) {
      const __m512bh w0 = (__m512bh)_mm512_load_si512(w + s * kSlotElems);
      const __m512bh w1 = (__m512bh)_mm512_load_si512(w + s * kSlotElems + 32);
#pragma GCC unroll 12
      for (int t = 0; t < T; ++t) {
        int32_t pair;
        std::memcpy(&pair, x + t * kChunk + kStep * s, sizeof(pair));
        const __m512bh xv = (__m512bh)_mm512_set1_epi32(pair);
        acc[0][t] = _mm512_dpbf16_ps(acc[0][t], w0, xv);
        acc[1][t] = _mm512_dpbf16_ps(acc[1][t], w1, xv);
      }
    }
    LaneTreeStep<kRg, T, kT>(n, depth, acc, partial, first, valid, y, ys);
  }
}

// The chunk [k0, k1) (the whole panel) of rows [r0, r1) for T tokens from t.
template <int T>
void Tokens(const MatMulArgs& a, Scratch& scratch, int64_t r0, int64_t r1, int64_t t, int64_t t_end,
            int64_t k0, int64_t k1) {
  const WeightMatrix& w = *a.w;
  const int64_t steps = (k1 - k0 + kStep - 1) / kStep;
  for (int i = 0; i < T; ++i) {
    const float* src = a.x + (t + i) * w.cols;
    uint16_t* dst = scratch.x + i * kChunk;
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t k = k0 + kStep * s;
      _mm512_store_si512(dst + kStep * s, (__m512i)LoadXBf16(src, k, k1 - k));
    }
  }
  // The next token tile's chunk of x, into L2 while this tile runs (as the fp32 lanes do).
  const int next_rows = static_cast<int>(std::clamp<int64_t>(t_end - (t + T), 0, T));
  NextTilePrefetch next(a.x + (t + T) * w.cols + k0, w.cols, next_rows, (k1 - k0 + 15) / 16,
                        (r1 - r0 + kGroupRows - 1) / kGroupRows);
  float* y = a.y + t * w.rows;
  for (int64_t r = r0; r < r1; r += kGroupRows) {
    next.BeforeGroup();
    const int valid = static_cast<int>(std::min<int64_t>(kGroupRows, r1 - r));
    const uint16_t* wp = scratch.panel + ((r - r0) / kGroupRows) * kGroupRows * kStep * steps;
    Tile<T>(wp, scratch.x, steps, k0 == 0, valid, y + r, w.rows, scratch.partial);
  }
}

}  // namespace

void PrefillBf16Lanes(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  static_assert(kStepsPerChunk == 16 && kPanelCols == kChunk);
  const int64_t K = a.w->cols;
  CHECK(a.w->dtype == DType::kBF16);
  Scratch& scratch = ThreadScratch<Scratch, kPanelBytes>();
  for (int64_t rb = r0; rb < r1; rb += kMaxPanelRows) {
    const int64_t re = std::min(r1, rb + kMaxPanelRows);
    for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
      const int64_t k1 = std::min(K, k0 + kChunk);
      PackPanel(*a.w, rb, re, k0, k1, scratch.panel);
      ForTokenTiles(t0, t1, [&](auto tile, int64_t t) {
        Tokens<decltype(tile)::value>(a, scratch, rb, re, t, t1, k0, k1);
      });
    }
  }
}

}  // namespace pagellm::kernels_internal::avx512
