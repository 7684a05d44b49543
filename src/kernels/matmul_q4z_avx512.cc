// AVX-512 (VNNI) MatMul for Q4_Z weights (4-bit codes u with a zero point z and an fp16 scale d
// per block: w = d * (u - z), the exact repack of AWQ / GPTQ int4 checkpoints) against
// Q8-quantized activations (layout in matmul_internal.h, prepared with c = 1: the bias field of
// activation block b is -sum(q)).
//
// As the Q4_0 kernels (matmul_quant_avx512.cc): one 512-bit register holds 16 weight rows, one
// int32 lane each, and the weights are read in the packed layout (Q4ZPackedLayout,
// packed_weights.h) made at load. The block sum of the 16 rows for one token is
//   s = dpwssd(0, zw, broadcast(bias_b))          z * (-sum q): int16 z times int16 bias
//   s = dpbusd(s, u[j], broadcast(q[4j..4j+3]))   sum u * q
//   acc = fma(float(s), dw * dx_b, acc)
// where zw holds each row's z in the low 16 bits of its lane (the high ones are 0, so the high
// 16 bits of the broadcast bias, its sign extension, add nothing; |bias| <= 32 * 127 fits int16).
// s is the exact int32 sum of (u - z) * q, so results equal the scalar reference bit for bit.
//
// Q4_Z128 (one d and z per row and 128 inputs; Q4Z128PackedLayout) loads the scales and zero
// points once per quad and scales by dw once per quad (matmul_internal.h):
//   f = float(s_0) * dx_0;  f = fma(float(s_i), dx_i, f), i = 1..3;  acc = fma(f, dw, acc)
// so per block and token it does one multiply fewer than Q4_Z and Q4_0, and streams 17 cache
// lines per 16 rows x 128 inputs against Q4_Z's 19 and Q4_0's 18.
//
// Decode and verification (<= 16 tokens) stream the packed groups with Q4_0's two-chain block
// kernel plus the zero term; more tokens unpack a group into a per-thread panel that tiles of 8
// tokens sweep. Matrices without a packed copy (tests, PAGELLM_PACKED_WEIGHTS=0) pack each group
// into a per-thread buffer first.
#include "kernels/simd_avx512.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/kernel_tuning.h"
#include "kernels/matmul_internal.h"
#include "kernels/packed_weights.h"
#include "pagellm/check.h"

namespace pagellm::kernels_internal::avx512 {
namespace {

// kShared: Q4_Z128 (one scale and zero point per quad), else Q4_Z.
template <bool kShared>
using L = Q4ZQuadLayout<kShared>;

constexpr int kRows = kAvx512QuantRowTile;  // 16: rows per group = int32 lanes
constexpr int kT = kAvx512QuantTokenTile;   // tokens per panel tile
constexpr int kDirectMaxTokens = 16;        // up to this many tokens stream the packed group
// Software prefetch distance, as for Q4_0 (matmul_quant_avx512.cc): the lines land in L2; no
// prefetch past the end of the task's rows.
const int64_t kPrefetchBytes = GetKernelTuning().quant_prefetch_bytes;
const bool kPrefetchToL2 = GetKernelTuning().quant_prefetch_l2;

static_assert(kRows == 16 && kT == 8, "lane and tile geometry assumed below");

inline float LoadF32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// Block i (< 4) of a packed quad: the 16 rows' scales and zero points (Q4_Z128: the quad's,
// for any i).
template <bool kShared>
PAGELLM_KERNEL_INLINE __m512 QuadScales(const uint8_t* quad, int i) {
  return _mm512_cvtph_ps(_mm256_load_si256(
      reinterpret_cast<const __m256i*>(quad + L<kShared>::kScalesAt + (kShared ? 0 : 32 * i))));
}
template <bool kShared>
PAGELLM_KERNEL_INLINE __m512i QuadZeros(const uint8_t* quad, int i) {
  return _mm512_cvtepu8_epi32(_mm_load_si128(
      reinterpret_cast<const __m128i*>(quad + L<kShared>::kZerosAt + (kShared ? 0 : 16 * i))));
}

template <int T>
PAGELLM_KERNEL_INLINE void ScaleAccumulate(const __m512i (&s)[T], __m512 dw, const uint8_t* act,
                                           int64_t as, const QuantActsLayout& l, int64_t blk,
                                           __m512 (&acc)[T]) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m512 scale =
        _mm512_mul_ps(dw, _mm512_set1_ps(LoadF32(act + t * as + l.dx_offset + 4 * blk)));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), scale, acc[t]);
  }
}

// Q4_Z128's per-block step: f = float(s) * dx (first block of a quad) or fma(float(s), dx, f).
template <int T>
PAGELLM_KERNEL_INLINE void BlockAccumulate(const __m512i (&s)[T], bool first, const uint8_t* act,
                                           int64_t as, const QuantActsLayout& l, int64_t blk,
                                           __m512 (&f)[T]) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m512 dx = _mm512_set1_ps(LoadF32(act + t * as + l.dx_offset + 4 * blk));
    f[t] = first ? _mm512_mul_ps(_mm512_cvtepi32_ps(s[t]), dx)
                 : _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), dx, f[t]);
  }
}

// The exact block sums s[t] = sum (u - z) q of one block of a packed group (codes at `codes`),
// T tokens. As Q4_0's AccumulateQ4Block: lo_k = q & 0x0f (elements 4k..4k+3), hi_k = q & 0xf0
// (16 x elements 16+4k..19+4k), so the 8 dot products form two independent chains and isum =
// s + (h >> 4) (h a multiple of 16, exact); the zero term starts the s chain.
template <int T>
PAGELLM_KERNEL_INLINE void BlockSums(const uint8_t* codes, __m512i zw, const uint8_t* act,
                                     int64_t as, const QuantActsLayout& l, int64_t blk,
                                     __m512i (&s)[T]) {
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
  if constexpr (T <= 2) {
    __m512i h[T];
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) {
      s[t] = DpwssdBroadcast(_mm512_setzero_si512(), zw, act + t * as + l.bias_offset + 4 * blk);
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
        s[t] = DpbusdBroadcast(s[t], hi[k], act + t * as + 32 * blk + 16 + 4 * k);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      s[t] =
          DpwssdBroadcast(_mm512_srai_epi32(s[t], 4), zw, act + t * as + l.bias_offset + 4 * blk);
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        s[t] = DpbusdBroadcast(s[t], lo[k], act + t * as + 32 * blk + 4 * k);
      }
    }
  }
}

template <int T>
inline void StoreRows(const __m512 (&acc)[T], int valid, float* y, int64_t ys) {
  const __mmask16 m = TailMask16(valid);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ys, m, acc[t]);
}

// T tokens over one packed group, quads streamed in order; the stream is linear across the
// task's groups, so prefetching a fixed distance ahead runs into the next group.
template <bool kShared, int T, PrefetchTarget kTarget>
void Direct(const uint8_t* group, const QuantActsLayout& l, const uint8_t* act, int valid, float* y,
            int64_t ys, const uint8_t* stop) {
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t blk = 0; blk < l.nb; blk += 4) {
    const uint8_t* quad = group + (blk >> 2) * L<kShared>::kQuadBytes;
    // The quad kPrefetchBytes ahead (clamped to the task's last quad, before stop).
    PrefetchBlockAhead<L<kShared>::kQuadBytes, kTarget>(quad, kPrefetchBytes, stop);
    __m512i s[T];
    if constexpr (kShared) {
      // Q4_Z128 rows are whole quads (cols % 128 == 0).
      const __m512i zw = QuadZeros<true>(quad, 0);
      __m512 f[T];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        BlockSums<T>(quad + i * L<kShared>::kCodeBytes, zw, act, l.bytes, l, blk + i, s);
        BlockAccumulate<T>(s, i == 0, act, l.bytes, l, blk + i, f);
      }
      const __m512 dw = QuadScales<true>(quad, 0);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(f[t], dw, acc[t]);
    } else {
      const int n = static_cast<int>(std::min<int64_t>(4, l.nb - blk));
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        if (i == n) break;
        BlockSums<T>(quad + i * L<kShared>::kCodeBytes, QuadZeros<false>(quad, i), act, l.bytes, l,
                     blk + i, s);
        ScaleAccumulate<T>(s, QuadScales<false>(quad, i), act, l.bytes, l, blk + i, acc);
      }
    }
  }
  StoreRows<T>(acc, valid, y, ys);
}

// A block of a group unpacked for the panel: u[k] codes of elements 4k..4k+3 (k < 4) and
// 16+4(k-4).. (k >= 4), zero points and scales.
struct PanelBlock {
  __m512i u[8];
  __m512i zw;
  __m512 dw;
};

template <bool kShared>
inline void LoadPanelBlock(const uint8_t* group, int64_t blk, PanelBlock* out) {
  const uint8_t* quad = group + (blk >> 2) * L<kShared>::kQuadBytes;
  const int i = static_cast<int>(blk & 3);
  const uint8_t* codes = quad + i * L<kShared>::kCodeBytes;
  const __m512i nib = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512i q = _mm512_load_si512(codes + 64 * k);
    out->u[k] = _mm512_and_si512(q, nib);
    out->u[k + 4] = _mm512_and_si512(_mm512_srli_epi16(q, 4), nib);
  }
  out->zw = QuadZeros<kShared>(quad, i);
  out->dw = QuadScales<kShared>(quad, i);
}

// T tokens against a panel of nb blocks (Q4_Z128: each block holds its quad's dw and zw).
template <bool kShared, int T>
void PanelTile(const PanelBlock* panel, const QuantActsLayout& l, const uint8_t* act, int valid,
               float* y, int64_t ys) {
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  // Q4_Z128: quads (cols % 128 == 0), f summed over a quad's blocks.
  constexpr int kStep = kShared ? 4 : 1;
  for (int64_t b0 = 0; b0 < l.nb; b0 += kStep) {
    __m512 f[T];
#pragma GCC unroll 4
    for (int i = 0; i < kStep; ++i) {
      const int64_t blk = b0 + i;
      const PanelBlock& pb = panel[blk];
      __m512i s[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        s[t] = DpwssdBroadcast(_mm512_setzero_si512(), pb.zw,
                               act + t * l.bytes + l.bias_offset + 4 * blk);
      }
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          s[t] = DpbusdBroadcast(s[t], pb.u[j], act + t * l.bytes + 32 * blk + 4 * j);
        }
      }
      if constexpr (kShared) {
        BlockAccumulate<T>(s, i == 0, act, l.bytes, l, blk, f);
      } else {
        ScaleAccumulate<T>(s, pb.dw, act, l.bytes, l, blk, acc);
      }
    }
    if constexpr (kShared) {
      const __m512 dw = panel[b0].dw;
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(f[t], dw, acc[t]);
    }
  }
  StoreRows<T>(acc, valid, y, ys);
}

// All nt tokens against a panel, in tiles of kT plus one tail tile.
template <bool kShared>
void PanelTokens(const PanelBlock* panel, const QuantActsLayout& l, const uint8_t* act0, int64_t nt,
                 int valid, float* y, int64_t ys) {
  int64_t t = 0;
  for (; t + kT <= nt; t += kT) {
    PanelTile<kShared, kT>(panel, l, act0 + t * l.bytes, valid, y + t * ys, ys);
  }
  if (t == nt) return;
  const uint8_t* act = act0 + t * l.bytes;
  float* yt = y + t * ys;
  WithTileSize<kT - 1>(nt - t, [&](auto tile) {
    PanelTile<kShared, decltype(tile)::value>(panel, l, act, valid, yt, ys);
  });
}

// Per-thread 64-byte-aligned scratch of at least `bytes`, grown on demand; kSlot keeps the
// panel and the packed-group buffer apart.
template <int kSlot>
uint8_t* Scratch(int64_t bytes) {
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<uint8_t, FreeDeleter> buf;
  thread_local int64_t capacity = 0;
  if (bytes > capacity) {
    const int64_t rounded = (bytes + 63) / 64 * 64;
    buf.reset(static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>(rounded))));
    CHECK(buf != nullptr) << "out of memory for " << rounded << " bytes of Q4_Z scratch";
    capacity = rounded;
  }
  return buf.get();
}

}  // namespace

template <DType kType>
void MatMulQ4ZBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  constexpr bool kShared = kType == DType::kQ4_Z128;
  static_assert(kShared || kType == DType::kQ4_Z);
  const WeightMatrix& w = *a.w;
  const bool packed = w.packed != nullptr;
  CHECK(!packed || r0 % kRows == 0) << "packed row ranges start on a group";
  const QuantActsLayout l = GetQuantActsLayout(w.cols);
  const L<kShared> pl = GetQ4ZQuadLayout<kShared>(w.rows, w.cols);
  const int64_t nt = t1 - t0;
  const uint8_t* act0 = a.qx + t0 * l.bytes;
  // End of the task's last group: the decode kernel prefetches no further.
  const uint8_t* stop = packed ? w.packed + (r1 + kRows - 1) / kRows * pl.group_bytes : nullptr;
  for (int64_t r = r0; r < r1; r += kRows) {
    const uint8_t* group;
    if (packed) {
      group = w.packed + (r / kRows) * pl.group_bytes;
    } else {
      uint8_t* g = Scratch<0>(pl.group_bytes);
      PackQ4ZGroup(w, r, g);
      group = g;
      stop = g + pl.group_bytes;
    }
    const int valid = static_cast<int>(std::min<int64_t>(kRows, r1 - r));
    float* y = a.y + t0 * w.rows + r;
    if (nt <= kDirectMaxTokens) {
      // The group (16 rows, ~38 KB for K = 2048) is still in L2 for a second pass of tokens.
      // Q4_Z128 passes 4 tokens at a time: its per-quad sums f take a register per token,
      // which 8 tokens beside the codes and accumulators would spill.
      constexpr int kPass = kShared ? 4 : 8;
      for (int64_t t = 0; t < nt; t += kPass) {
        const uint8_t* act = act0 + t * l.bytes;
        float* yt = y + t * w.rows;
        WithTileSize<kPass>(std::min<int64_t>(kPass, nt - t), [&](auto tile) {
          WithPrefetchTarget(kPrefetchBytes, kPrefetchToL2, [&](auto target) {
            Direct<kShared, decltype(tile)::value, decltype(target)::value>(group, l, act, valid,
                                                                            yt, w.rows, stop);
          });
        });
      }
      continue;
    }
    auto* panel = reinterpret_cast<PanelBlock*>(Scratch<1>(l.nb * sizeof(PanelBlock)));
    for (int64_t blk = 0; blk < l.nb; ++blk) LoadPanelBlock<kShared>(group, blk, &panel[blk]);
    PanelTokens<kShared>(panel, l, act0, nt, valid, y, w.rows);
  }
}

template void MatMulQ4ZBlock<DType::kQ4_Z>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
template void MatMulQ4ZBlock<DType::kQ4_Z128>(const MatMulArgs&, int64_t, int64_t, int64_t,
                                              int64_t);

}  // namespace pagellm::kernels_internal::avx512
