// AVX-512 (VNNI) MatMul for Q8_0 / Q4_0 weights against Q8-quantized activations, and the
// activation quantizer (layout in matmul_internal.h).
//
// One 512-bit register holds 16 weight rows, one int32 lane each. A 16-row group is "packed"
// per 32-block into 8 registers u[j] (lane r = the 4 unsigned weight codes of elements
// 4j..4j+3 of row r) plus a register of the 16 row scales, by a dword transpose of the rows'
// block bytes. Then for each token
//   s   = bias_b (broadcast); s = vpdpbusd(s, u[j], broadcast(q[4j..4j+3])) for j = 0..7
//   acc = fma(float(s), dw * dx_b, acc)
// computes the exact block dot products of all 16 rows at once (64 int8 MACs per vpdpbusd, no
// horizontal reduction) followed by the per-block fp32 step of the reference scheme.
//
// Few tokens (decode): each block is packed in registers and used at once (Direct). More
// tokens: the group's rows are packed once into a per-thread panel that tiles of kT tokens
// sweep (Panel). Both give the reference results bit for bit. With weights packed at load
// (packed_weights.h), decode and verification (<= 16 tokens) stream the packed groups
// (DirectPacked; Q4_0: DirectPackedQ4, two independent vpdpbusd chains per block).
#include "kernels/simd_avx512.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/kernel_tuning.h"
#include "kernels/matmul_decode_internal.h"
#include "kernels/matmul_internal.h"
#include "kernels/packed_weights.h"
#include "pagellm/check.h"

namespace pagellm::kernels_internal::avx512 {
namespace {

constexpr int kRows = kAvx512QuantRowTile;  // 16: rows per group = int32 lanes
constexpr int kT = kAvx512QuantTokenTile;   // tokens per panel tile
constexpr int kDirectMaxTokens = 4;         // up to this many tokens skip the panel
constexpr int kDirectPackedMaxTokens = 16;  // packed weights: up to this many skip the panel
// Software prefetch distance for weights. A group streams 16 short rows (1-9 KiB) at once, too
// briefly for the hardware prefetcher to lock on; the group's rows are contiguous, so it
// prefetches that region as if it were consumed linearly, this far ahead of the next group.
// The lines land in L2 (they outrun L1). 64 KiB (1-4 groups ahead) against 16 KiB, batch-1
// decode of Llama-3.2-1B on 2 threads, alternating in the same minutes: Q4_0 +1.4-7.9% in 7 of
// 7 rounds, Q8_0 +1.1-2.4% in 3 of 3; 128 and 256 KiB no better. The prefetch stops at the end
// of the task's rows (PrefetchAhead): Q4_0 decode +3-6% (5 quiet-bus rounds). (Caution: until
// 52c23eb GCC deleted the calls of these prefetch-only helpers, PAGELLM_PREFETCH_HELPER says
// why, so some of those rounds may have compared identical code. Zen 4, 2026-12-03, same binary
// with the prefetch issued: Q4_0 tg64 +5% for 64 KiB over none, Q8_0 within noise.)
const int64_t kPrefetchBytes = GetKernelTuning().quant_prefetch_bytes;
const bool kPrefetchToL2 = GetKernelTuning().quant_prefetch_l2;
// Packed Q8_0 groups have their own distance (kernel_tuning.cc: 0 on Zen 5).
const int64_t kQ8PrefetchBytes = GetKernelTuning().q8_0_prefetch_bytes;

static_assert(kRows == 16 && kT == 8, "lane and tile geometry assumed below");

// One packed 32-block of a 16-row group.
struct PackedBlock {
  __m512i u[8];
  __m512 dw;
};

// Prefetches the cache lines of [p, p + kBytes).
template <int64_t kBytes>
PAGELLM_PREFETCH_HELPER void PrefetchRange(const uint8_t* p) {
#pragma GCC unroll 16
  for (int64_t i = 0; i < (kBytes + 63) / 64; ++i) {
    PrefetchWeightLine(p + 64 * i, kPrefetchToL2);
  }
}

// The packed decode stream's prefetch distance of kType.
template <DType kType>
int64_t PackedPrefetchBytes() {
  return kType == DType::kQ8_0 ? kQ8PrefetchBytes : kPrefetchBytes;
}

// Prefetches the packed pair PackedPrefetchBytes ahead of the one at p (simd_avx512.h,
// PrefetchBlockAhead: clamped to the task's last pair, before stop).
template <DType kType, PrefetchTarget kTarget>
PAGELLM_PREFETCH_HELPER void PrefetchAhead(const uint8_t* p, const uint8_t* stop) {
  PrefetchBlockAhead<QuantPackedPairBytes(kType), kTarget>(p, PackedPrefetchBytes<kType>(), stop);
}

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

// A 16-row group: row r starts at rows[r] (rows past the matrix end repeat the last row; their
// lanes are computed and discarded). offsets[r] = rows[r] - rows[0], for the scale gather.
struct RowGroup {
  const uint8_t* rows[kRows];
  __m512i offsets;
  int valid;
};

inline RowGroup MakeRowGroup(const WeightMatrix& w, int64_t r0, int64_t r1) {
  RowGroup g;
  g.valid = static_cast<int>(std::min<int64_t>(kRows, r1 - r0));
  alignas(64) int32_t off[kRows];
  for (int r = 0; r < kRows; ++r) {
    const int64_t rr = r0 + std::min(r, g.valid - 1);
    g.rows[r] = w.row(rr);
    off[r] = static_cast<int32_t>((rr - r0) * w.row_bytes());
  }
  g.offsets = _mm512_load_si512(off);
  return g;
}

// The 16 rows' scales of block blk: gathers the 4 bytes at each row's block start, whose low
// 16 bits are the fp16 d. (Slow: vpgatherdd is microcoded; see ChunkScales.)
template <DType kType>
inline __m512 GatherScales(const RowGroup& g, int64_t blk) {
  constexpr int64_t bb = DTypeBlockBytes(kType);
  const __m512i d32 = _mm512_i32gather_epi32(g.offsets, g.rows[0] + blk * bb, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d32));
}

// Scales of the 8 blocks [8c, 8c + 8) of all 16 rows (requires 8c + 8 <= nb): per row, one or
// two vpermt2w pick the 8 fp16 words out of the chunk's bytes, then a 16x8 word transpose turns
// them into one register per block.
template <DType kType>
inline void ChunkScales(const RowGroup& g, int64_t c, __m512 (&dw)[8]) {
  constexpr int64_t bb = DTypeBlockBytes(kType);
  constexpr int kWords = bb / 2;  // block stride in 16-bit words
  __m128i s[kRows];               // s[r] = scales of blocks 8c..8c+7 of row r
  if constexpr (kType == DType::kQ4_0) {
    // Words 9k (k < 8) all lie in the first 128 bytes of the chunk.
    alignas(64) static constexpr int16_t kIdx[32] = {0, 9, 18, 27, 36, 45, 54, 63};
    const __m512i idx = _mm512_load_si512(kIdx);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* p = g.rows[r] + 8 * c * bb;
      s[r] = _mm512_castsi512_si128(
          _mm512_permutex2var_epi16(_mm512_loadu_si512(p), idx, _mm512_loadu_si512(p + 64)));
    }
  } else {
    // Words 17k: blocks 0..3 in the first 128 bytes, blocks 4..7 in the next 128.
    static_assert(kWords == 17);
    alignas(64) static constexpr int16_t kIdx[32] = {0, 17, 34, 51, 4, 21, 38, 55};
    const __m512i idx = _mm512_load_si512(kIdx);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* p = g.rows[r] + 8 * c * bb;
      const __m128i lo = _mm512_castsi512_si128(
          _mm512_permutex2var_epi16(_mm512_loadu_si512(p), idx, _mm512_loadu_si512(p + 64)));
      const __m128i hi = _mm512_castsi512_si128(
          _mm512_permutex2var_epi16(_mm512_loadu_si512(p + 128), idx, _mm512_loadu_si512(p + 192)));
      s[r] = _mm_blend_epi32(lo, hi, 0xc);  // words 0..3 of lo, 4..7 of hi
    }
  }
  // z[i] = [s[i] | s[i+4] | s[i+8] | s[i+12]]: 128-bit lane m holds row i + 4m.
  __m512i z[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    __m512i v = _mm512_castsi128_si512(s[i]);
    v = _mm512_inserti32x4(v, s[i + 4], 1);
    v = _mm512_inserti32x4(v, s[i + 8], 2);
    z[i] = _mm512_inserti32x4(v, s[i + 12], 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi16(z[0], z[1]);
  const __m512i t1 = _mm512_unpackhi_epi16(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi16(z[2], z[3]);
  const __m512i t3 = _mm512_unpackhi_epi16(z[2], z[3]);
  // u[k], lane m: [rows 4m..4m+3 of block 2k | rows 4m..4m+3 of block 2k+1] (4 words each).
  const __m512i u[4] = {_mm512_unpacklo_epi32(t0, t2), _mm512_unpackhi_epi32(t0, t2),
                        _mm512_unpacklo_epi32(t1, t3), _mm512_unpackhi_epi32(t1, t3)};
  const __m512i gather = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512i b = _mm512_permutexvar_epi64(gather, u[k]);  // [block 2k | block 2k+1]
    dw[2 * k] = _mm512_cvtph_ps(_mm512_castsi512_si256(b));
    dw[2 * k + 1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(b, 1));
  }
}

// Packs the weight codes of block `blk` of the group into registers.
template <DType kType>
inline void PackCodes(const RowGroup& g, int64_t blk, PackedBlock* out) {
  constexpr int64_t bb = DTypeBlockBytes(kType);
  const int64_t qoff = blk * bb + 2;
  if constexpr (kType == DType::kQ8_0) {
    // z[i] = [row i | row i+8] (8 dwords each); an 8x8 dword transpose in both 256-bit halves
    // yields u[j] = [rows 0..7 dword j | rows 8..15 dword j].
    __m512i z[8], t[8], v[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.rows[i] + qoff));
      const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.rows[i + 8] + qoff));
      z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm512_unpacklo_epi32(z[i], z[i + 1]);
      t[i + 1] = _mm512_unpackhi_epi32(z[i], z[i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 8; i += 4) {
      v[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
      v[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
      v[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
      v[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    // v[k] (k < 4) holds dwords k (128-bit lanes 0, 2) and k+4 (lanes 1, 3) of rows 0..3 / 8..11;
    // v[k+4] the same for rows 4..7 / 12..15.
    const __m512i lo_idx = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i hi_idx = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      out->u[k] = _mm512_xor_si512(_mm512_permutex2var_epi64(v[k], lo_idx, v[k + 4]), flip);
      out->u[k + 4] = _mm512_xor_si512(_mm512_permutex2var_epi64(v[k], hi_idx, v[k + 4]), flip);
    }
  } else {
    // a[i] = [row i | row i+4 | row i+8 | row i+12] (4 dwords of nibbles each); a 4x4 dword
    // transpose per 128-bit lane yields q[k] = raw dword k of rows 0..15. Low nibbles are
    // elements 4k..4k+3, high nibbles elements 16+4k..19+4k.
    __m512i a[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      __m512i v = _mm512_castsi128_si512(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.rows[i] + qoff)));
      v = _mm512_inserti32x4(
          v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.rows[i + 4] + qoff)), 1);
      v = _mm512_inserti32x4(
          v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.rows[i + 8] + qoff)), 2);
      v = _mm512_inserti32x4(
          v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.rows[i + 12] + qoff)), 3);
      a[i] = v;
    }
    const __m512i t0 = _mm512_unpacklo_epi32(a[0], a[1]);
    const __m512i t1 = _mm512_unpackhi_epi32(a[0], a[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(a[2], a[3]);
    const __m512i t3 = _mm512_unpackhi_epi32(a[2], a[3]);
    const __m512i q[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                          _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
    const __m512i nib = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      out->u[k] = _mm512_and_si512(q[k], nib);
      out->u[k + 4] = _mm512_and_si512(_mm512_srli_epi16(q[k], 4), nib);
    }
  }
}

// acc[t] += block blk of the packed rows times token t (prepared activations at act + t * as).
template <int T>
PAGELLM_KERNEL_INLINE void AccumulateBlock(const PackedBlock& pb, const uint8_t* act, int64_t as,
                                           const QuantActsLayout& l, int64_t blk,
                                           __m512 (&acc)[T]) {
  __m512i s[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
    s[t] = _mm512_set1_epi32(LoadI32(act + t * as + l.bias_offset + 4 * blk));
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512i x = _mm512_set1_epi32(LoadI32(act + t * as + 32 * blk + 4 * j));
      s[t] = _mm512_dpbusd_epi32(s[t], pb.u[j], x);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m512 scale =
        _mm512_mul_ps(pb.dw, _mm512_set1_ps(LoadF32(act + t * as + l.dx_offset + 4 * blk)));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), scale, acc[t]);
  }
}

template <int T>
inline void StoreRows(const __m512 (&acc)[T], int valid, float* y, int64_t ys) {
  const __mmask16 m = TailMask16(valid);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ys, m, acc[t]);
}

// T tokens, packing each block in registers as it goes.
template <DType kType, int T>
void Direct(const RowGroup& g, int64_t ws, const QuantActsLayout& l, const uint8_t* act, float* y,
            int64_t ys) {
  constexpr int64_t bb = DTypeBlockBytes(kType);
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const uint8_t* ahead = g.rows[0] + kRows * ws + kPrefetchBytes;
  int64_t blk = 0;
  for (int64_t c = 0; c < l.nb / 8; ++c) {
    __m512 dw[8];
    ChunkScales<kType>(g, c, dw);
    for (int i = 0; i < 8; ++i, ++blk) {
      PrefetchRange<kRows * bb>(ahead + blk * (kRows * bb));
      PackedBlock pb;
      PackCodes<kType>(g, blk, &pb);
      pb.dw = dw[i];
      AccumulateBlock<T>(pb, act, l.bytes, l, blk, acc);
    }
  }
  for (; blk < l.nb; ++blk) {
    PackedBlock pb;
    PackCodes<kType>(g, blk, &pb);
    pb.dw = GatherScales<kType>(g, blk);
    AccumulateBlock<T>(pb, act, l.bytes, l, blk, acc);
  }
  StoreRows<T>(acc, g.valid, y, ys);
}

// T tokens against a packed panel (nb blocks).
template <int T>
void PanelTile(const PackedBlock* panel, const QuantActsLayout& l, const uint8_t* act, int valid,
               float* y, int64_t ys) {
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t blk = 0; blk < l.nb; ++blk)
    AccumulateBlock<T>(panel[blk], act, l.bytes, l, blk, acc);
  StoreRows<T>(acc, valid, y, ys);
}

// All nt tokens against a packed panel, in tiles of kT plus one tail tile.
void PanelTokens(const PackedBlock* panel, const QuantActsLayout& l, const uint8_t* act0,
                 int64_t nt, int valid, float* y, int64_t ys) {
  int64_t t = 0;
  for (; t + kT <= nt; t += kT) {
    PanelTile<kT>(panel, l, act0 + t * l.bytes, valid, y + t * ys, ys);
  }
  if (t == nt) return;
  const uint8_t* act = act0 + t * l.bytes;
  float* yt = y + t * ys;
  WithTileSize<kT - 1>(
      nt - t, [&](auto tile) { PanelTile<decltype(tile)::value>(panel, l, act, valid, yt, ys); });
}

// Per-thread panel storage, grown on demand.
PackedBlock* PanelScratch(int64_t blocks) {
  struct FreeDeleter {
    void operator()(PackedBlock* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<PackedBlock, FreeDeleter> buf;
  thread_local int64_t capacity = 0;
  if (blocks > capacity) {
    buf.reset(static_cast<PackedBlock*>(std::aligned_alloc(64, blocks * sizeof(PackedBlock))));
    CHECK(buf != nullptr) << "out of memory for the weight panel";
    capacity = blocks;
  }
  return buf.get();
}

// ---- Packed weights (kernels/packed_weights.h): the transpose was done at load time. ----

// Block blk of a packed group: codes and scales with plain loads.
template <DType kType>
PAGELLM_KERNEL_INLINE void LoadPackedBlock(const uint8_t* group, const QuantPackedLayout& pl,
                                           int64_t blk, PackedBlock* out) {
  const uint8_t* codes = group + pl.CodeOffset(blk);
  if constexpr (kType == DType::kQ8_0) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) out->u[j] = _mm512_load_si512(codes + 64 * j);
  } else {
    const __m512i nib = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i q = _mm512_load_si512(codes + 64 * k);
      out->u[k] = _mm512_and_si512(q, nib);
      out->u[k + 4] = _mm512_and_si512(_mm512_srli_epi16(q, 4), nib);
    }
  }
  out->dw = _mm512_cvtph_ps(
      _mm256_load_si256(reinterpret_cast<const __m256i*>(group + pl.ScaleOffset(blk))));
}

// Decode over a packed group: T tokens, pairs of blocks streamed in order; the stream is linear
// across the task's groups, so prefetching a fixed distance ahead runs into the next group.
template <DType kType, int T, PrefetchTarget kTarget>
void DirectPacked(const uint8_t* group, const QuantPackedLayout& pl, const QuantActsLayout& l,
                  const uint8_t* act, int valid, float* y, int64_t ys, const uint8_t* stop) {
  constexpr int64_t kPairBytes = QuantPackedPairBytes(kType);
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t blk = 0; blk < l.nb; blk += 2) {
    PrefetchAhead<kType, kTarget>(group + (blk >> 1) * kPairBytes, stop);
    PackedBlock pb;
    LoadPackedBlock<kType>(group, pl, blk, &pb);
    AccumulateBlock<T>(pb, act, l.bytes, l, blk, acc);
    if (blk + 1 == l.nb) break;
    LoadPackedBlock<kType>(group, pl, blk + 1, &pb);
    AccumulateBlock<T>(pb, act, l.bytes, l, blk + 1, acc);
  }
  StoreRows<T>(acc, valid, y, ys);
}

// Decode over a packed Q4_0 group, T tokens. Per block the 4 code registers q[k] are split
// into lo_k = q & 0x0f (elements 4k..4k+3) and hi_k = q & 0xf0 (= 16 x elements 16+4k..19+4k,
// no shift needed), so there is no dependency through a shift and the 8 vpdpbusd of a token
// form two independent chains of 4:
//   s = bias_b + sum_k dpbusd(lo_k, x[4k..4k+3]),  h = sum_k dpbusd(hi_k, x[16+4k..19+4k])
//   isum_b = s + (h >> 4)     (h is a multiple of 16, |h| < 2^23: the shift is exact)
// which is the same exact int32 block sum as AccumulateBlock's, so the fp32 step (and the
// result) is bitwise unchanged. For T <= 2 the two chains run side by side (latency-bound
// otherwise: one chain of 8 dependent vpdpbusd per block); for more tokens the tokens
// themselves are independent chains and h is folded into s before the lo chain, saving a
// register per token.
template <int T>
PAGELLM_KERNEL_INLINE void AccumulateQ4Block(const uint8_t* codes, __m512 dw, const uint8_t* act,
                                             int64_t as, const QuantActsLayout& l, int64_t blk,
                                             __m512 (&acc)[T]) {
  const __m512i lo_mask = _mm512_set1_epi8(0x0f);
  const __m512i hi_mask = _mm512_set1_epi8(static_cast<char>(0xf0));
  __m512i lo[4], hi[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    __m512i q = _mm512_load_si512(codes + 64 * k);
    asm("" : "+v"(q));  // one load: GCC would otherwise fold it into both ANDs (8 loads)
    lo[k] = _mm512_and_si512(q, lo_mask);
    hi[k] = _mm512_and_si512(q, hi_mask);
  }
  __m512i s[T];
  if constexpr (T <= 2) {
    __m512i h[T];
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) {
      s[t] = _mm512_set1_epi32(LoadI32(act + t * as + l.bias_offset + 4 * blk));
      h[t] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) {
        const uint8_t* x = act + t * as + 32 * blk;
        s[t] = DpbusdBroadcast(s[t], lo[k], x + 4 * k);
        h[t] = DpbusdBroadcast(h[t], hi[k], x + 16 + 4 * k);
      }
    }
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) s[t] = _mm512_add_epi32(s[t], _mm512_srai_epi32(h[t], 4));
  } else {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const uint8_t* x = act + t * as + 32 * blk;
        s[t] = _mm512_dpbusd_epi32(s[t], hi[k], _mm512_set1_epi32(LoadI32(x + 16 + 4 * k)));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      s[t] = _mm512_add_epi32(_mm512_srai_epi32(s[t], 4),
                              _mm512_set1_epi32(LoadI32(act + t * as + l.bias_offset + 4 * blk)));
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const uint8_t* x = act + t * as + 32 * blk;
        s[t] = _mm512_dpbusd_epi32(s[t], lo[k], _mm512_set1_epi32(LoadI32(x + 4 * k)));
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m512 scale =
        _mm512_mul_ps(dw, _mm512_set1_ps(LoadF32(act + t * as + l.dx_offset + 4 * blk)));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), scale, acc[t]);
  }
}

template <int T, PrefetchTarget kTarget>
void DirectPackedQ4(const uint8_t* group, const QuantPackedLayout& pl, const QuantActsLayout& l,
                    const uint8_t* act, int valid, float* y, int64_t ys, const uint8_t* stop) {
  constexpr int64_t kPairBytes = QuantPackedPairBytes(DType::kQ4_0);
  constexpr int64_t kCodeBytes = QuantPackedCodeBytes(DType::kQ4_0);
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t blk = 0; blk < l.nb; blk += 2) {
    const uint8_t* pair = group + (blk >> 1) * kPairBytes;
    PrefetchAhead<DType::kQ4_0, kTarget>(pair, stop);
    const __m512 dw0 =
        _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(pair + 2 * kCodeBytes)));
    AccumulateQ4Block<T>(pair, dw0, act, l.bytes, l, blk, acc);
    if (blk + 1 == l.nb) break;
    const __m512 dw1 = _mm512_cvtph_ps(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(pair + 2 * kCodeBytes + 32)));
    AccumulateQ4Block<T>(pair + kCodeBytes, dw1, act, l.bytes, l, blk + 1, acc);
  }
  StoreRows<T>(acc, valid, y, ys);
}

// T tokens over one packed group: the Q4_0 kernel above, or the generic one.
template <DType kType, int T, PrefetchTarget kTarget>
inline void DirectPackedAny(const uint8_t* group, const QuantPackedLayout& pl,
                            const QuantActsLayout& l, const uint8_t* act, int valid, float* y,
                            int64_t ys, const uint8_t* stop) {
  if constexpr (kType == DType::kQ4_0) {
    // PAGELLM_Q4_SPLIT_CHAINS=0: the generic kernel (A/B runs; identical results).
    static const bool split = [] {
      const char* e = std::getenv("PAGELLM_Q4_SPLIT_CHAINS");
      return e == nullptr || e[0] != '0';
    }();
    if (split) {
      DirectPackedQ4<T, kTarget>(group, pl, l, act, valid, y, ys, stop);
    } else {
      DirectPacked<kType, T, kTarget>(group, pl, l, act, valid, y, ys, stop);
    }
  } else {
    DirectPacked<kType, T, kTarget>(group, pl, l, act, valid, y, ys, stop);
  }
}

template <DType kType>
void BlockPacked(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const WeightMatrix& w = *a.w;
  CHECK_EQ(r0 % kRows, 0) << "packed row ranges start on a group";
  const QuantActsLayout l = GetQuantActsLayout(w.cols);
  const QuantPackedLayout pl = GetQuantPackedLayout(kType, w.rows, w.cols);
  const int64_t nt = t1 - t0;
  const uint8_t* act0 = a.qx + t0 * l.bytes;
  // End of the task's last group: the decode kernels prefetch no further.
  const uint8_t* stop = w.packed + (r1 + kRows - 1) / kRows * pl.group_bytes;
  for (int64_t r = r0; r < r1; r += kRows) {
    const uint8_t* group = w.packed + (r / kRows) * pl.group_bytes;
    const int valid = static_cast<int>(std::min<int64_t>(kRows, r1 - r));
    float* y = a.y + t0 * w.rows + r;
    if (nt <= kDirectPackedMaxTokens) {
      // Few tokens (decode, speculative verification of up to 15 drafts): stream the packed
      // group once per 8 tokens; the group (16 rows, ~35 KB for K = 2048) is still in L2 for
      // the second pass, so 9..16 tokens cost about one weight read, not a panel copy.
      for (int64_t t = 0; t < nt; t += 8) {
        const uint8_t* act = act0 + t * l.bytes;
        float* yt = y + t * w.rows;
        WithTileSize<8>(std::min<int64_t>(8, nt - t), [&](auto tile) {
          WithPrefetchTarget(PackedPrefetchBytes<kType>(), kPrefetchToL2, [&](auto target) {
            DirectPackedAny<kType, decltype(tile)::value, decltype(target)::value>(
                group, pl, l, act, valid, yt, w.rows, stop);
          });
        });
      }
      continue;
    }
    PackedBlock* panel = PanelScratch(l.nb);
    for (int64_t blk = 0; blk < l.nb; ++blk) LoadPackedBlock<kType>(group, pl, blk, &panel[blk]);
    PanelTokens(panel, l, act0, nt, valid, y, w.rows);
  }
}

template <DType kType>
void Block(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  if (a.w->packed != nullptr) {
    BlockPacked<kType>(a, r0, r1, t0, t1);
    return;
  }
  constexpr int64_t bb = DTypeBlockBytes(kType);
  const WeightMatrix& w = *a.w;
  const QuantActsLayout l = GetQuantActsLayout(w.cols);
  const int64_t ws = w.row_bytes();
  const int64_t nt = t1 - t0;
  const uint8_t* act0 = a.qx + t0 * l.bytes;
  for (int64_t r = r0; r < r1; r += kRows) {
    const RowGroup g = MakeRowGroup(w, r, r1);
    float* y = a.y + t0 * w.rows + r;
    if (nt <= kDirectMaxTokens) {
      WithTileSize<kDirectMaxTokens>(
          nt, [&](auto tile) { Direct<kType, decltype(tile)::value>(g, ws, l, act0, y, w.rows); });
      continue;
    }
    PackedBlock* panel = PanelScratch(l.nb);
    const uint8_t* ahead = g.rows[0] + kRows * ws + kPrefetchBytes;
    int64_t blk = 0;
    for (int64_t c = 0; c < l.nb / 8; ++c) {
      __m512 dw[8];
      ChunkScales<kType>(g, c, dw);
      for (int i = 0; i < 8; ++i, ++blk) {
        PrefetchRange<kRows * bb>(ahead + blk * (kRows * bb));
        PackCodes<kType>(g, blk, &panel[blk]);
        panel[blk].dw = dw[i];
      }
    }
    for (; blk < l.nb; ++blk) {
      PackCodes<kType>(g, blk, &panel[blk]);
      panel[blk].dw = GatherScales<kType>(g, blk);
    }
    PanelTokens(panel, l, act0, nt, g.valid, y, w.rows);
  }
}

// roundf(v), round half away from zero, as an int32, for |v| <= 2^22 (activation codes are
// within 127.5): trunc(v + copysign(0.5 - 2^-25, v)), three operations. The sum reaches the
// next integer exactly when v's fraction is >= 0.5 (a fraction of 0.5 gives n + 1 - 2^-25,
// which rounds to n + 1 for n >= 1, and to 1 from 0.5: a tie, to even); below 0.5 it stays at
// least one ulp of v short of it. The serial quantization of a decode step's activations sits
// between its MatMuls, with the second core waiting.
inline __m512i RoundHalfAwayToInt(__m512 v) {
  // (v & sign) | (0.5 - 2^-25): vpternlogd with imm (A & B) | C.
  const __m512 bias = _mm512_castsi512_ps(
      _mm512_ternarylogic_epi32(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN),
                                _mm512_castps_si512(_mm512_set1_ps(0.49999997f)), 0xea));
  return _mm512_cvttps_epi32(_mm512_add_ps(v, bias));
}

}  // namespace

template <DType kType>
void MatMulQuantBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  Block<kType>(a, r0, r1, t0, t1);
}
template void MatMulQuantBlock<DType::kQ8_0>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
template void MatMulQuantBlock<DType::kQ4_0>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);

void PrepareQuantActs(int32_t c, const float* x, int64_t cols, uint8_t* out) {
  const QuantActsLayout l = GetQuantActsLayout(cols);
  // Zero padding first (odd last block, scale/bias pads, tail to 64 bytes).
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + l.dx_offset - 32), _mm256_setzero_si256());
  for (int64_t i = l.dx_offset; i < l.bytes; i += 64)
    _mm512_storeu_si512(out + i, _mm512_setzero_si512());
  for (int64_t b = 0; b < l.nb; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * b);
    const __m512 v1 = _mm512_loadu_ps(x + 32 * b + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    const __m512i q0 = RoundHalfAwayToInt(_mm512_mul_ps(v0, id));
    const __m512i q1 = RoundHalfAwayToInt(_mm512_mul_ps(v1, id));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32 * b), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32 * b + 16), _mm512_cvtepi32_epi8(q1));
    const int32_t bias = -c * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    std::memcpy(out + l.dx_offset + 4 * b, &d, 4);
    std::memcpy(out + l.bias_offset + 4 * b, &bias, 4);
  }
}

void PrepareQ8KActs(int32_t, const float* x, int64_t cols, uint8_t* out) {
  const Q8KActsLayout l = GetQ8KActsLayout(cols);
  std::memset(out + l.d_offset, 0, static_cast<size_t>(l.bytes - l.d_offset));
  const __m512i ones = _mm512_set1_epi8(1);
  // Group g of a super-block is 128-bit lane g % 4 of its 64-byte quarter g / 4; after the
  // unpacks below, dword 4 * lane + quarter holds group 4 * quarter + lane's sum.
  const __m512i group_order =
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  for (int64_t s = 0; s < l.nsb; ++s) {
    const float* xs = x + 256 * s;
    uint8_t* qs = out + 256 * s;
    __m512 m = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xs + 16 * i)));
    const float d = _mm512_reduce_max_ps(m) / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      const __m512i q = RoundHalfAwayToInt(_mm512_mul_ps(_mm512_loadu_ps(xs + 16 * i), id));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16 * i), _mm512_cvtepi32_epi8(q));
    }
    // The 16 group sums: sums of 4 codes per dword (vpmaddubsw and vpmaddwd with ones), then of the
    // 4 dwords of each 128-bit lane, four quarters at a time.
    __m512i q4[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      // (AVX512BW only: this level does not assume VNNI.)
      const __m512i pairs = _mm512_maddubs_epi16(ones, _mm512_loadu_si512(qs + 64 * k));
      q4[k] = _mm512_madd_epi16(pairs, _mm512_set1_epi16(1));
    }
    const __m512i t01 =
        _mm512_add_epi32(_mm512_unpacklo_epi32(q4[0], q4[1]), _mm512_unpackhi_epi32(q4[0], q4[1]));
    const __m512i t23 =
        _mm512_add_epi32(_mm512_unpacklo_epi32(q4[2], q4[3]), _mm512_unpackhi_epi32(q4[2], q4[3]));
    const __m512i sums =
        _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
    const __m256i bsum = _mm512_cvtepi32_epi16(_mm512_permutexvar_epi32(group_order, sums));
    std::memcpy(out + l.d_offset + 4 * s, &d, 4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + l.bsum_offset + 32 * s), bsum);
  }
}

}  // namespace pagellm::kernels_internal::avx512
