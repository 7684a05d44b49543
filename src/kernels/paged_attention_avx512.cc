// AVX-512 attention kernel: fused decode of K/V rows (every KV format), 16-position score
// tiles reduced with one transpose-add tree, vectorised exp, online softmax. Prefill runs
// process a tile's query heads up to four at a time, sharing each K / V vector load.
#include "kernels/simd_avx512.h"  // first: silences GCC 12 false -Wuninitialized in intrinsics

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kv_quant.h"
#include "kernels/paged_attention.h"

namespace pagellm::attention_internal {
namespace {

// Query heads per K tile from which transposing the tile pays (DotsTransposed). 4: a decode
// token of a 4-query-head group (Llama-3.2-1B shape, f16 cache, depth 4,096, 16 layers; Zen 5,
// build/bench/attention_bench decode/f16/depth4096, alternating builds) 10.1-10.7 -> 8.8-9.4 ms
// on 2 threads with 8 (DotsFixed per head) vs 4 (transposed), 13.6-14.1 -> 10.6-10.9 with the
// cache's rows in L3.
constexpr int kTransposeMinHeads = 4;
// Query heads per batch of a tile (see AttendAvx512).
constexpr int kHeadBatch = 4;

inline __mmask16 Mask(int n) {
  return n >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1u);
}

inline __mmask32 Mask32(int n) {
  return n >= 32 ? 0xFFFFFFFFu : static_cast<__mmask32>((1u << n) - 1u);
}

// Converts 32 fp16 words to float (times *mul unless null), storing the first min(n, 32).
inline void StoreF16x32(__m512i h, const __m512* mul, float* dst, int n) {
  __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
  __m512 hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
  if (mul != nullptr) {
    lo = _mm512_mul_ps(lo, *mul);
    hi = _mm512_mul_ps(hi, *mul);
  }
  _mm512_mask_storeu_ps(dst, Mask(n), lo);
  if (n > 16) _mm512_mask_storeu_ps(dst + 16, Mask(n - 16), hi);
}

// Integer codes of an int8/int4 row as floats, without scale and zero point (d floats into
// dst); the row's fp16 scale and zero go to *scale_h / *zero_h unconverted. The kernel folds
// them into the dot products and the V accumulation (see AttendAvx512), so a row costs one
// widen + int->float convert per 16 elements and no scalar fp16 conversions.
void DecodeIntCodes(KvCacheDtype dtype, const uint8_t* src, int d, float* dst, uint16_t* scale_h,
                    uint16_t* zero_h) {
  if (dtype == KvCacheDtype::kInt8) {
    std::memcpy(scale_h, src + d, 2);
    std::memcpy(zero_h, src + d + 2, 2);
    for (int x = 0; x < d; x += 16)
      _mm512_mask_storeu_ps(
          dst + x, Mask(d - x),
          _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(Mask(d - x), src + x))));
    return;
  }
  // int4: byte i holds element i (low nibble) and element i + d/2 (high nibble).
  const int half = d / 2;
  std::memcpy(scale_h, src + half, 2);
  std::memcpy(zero_h, src + half + 2, 2);
  const __m128i low4 = _mm_set1_epi8(0x0F);
  for (int x = 0; x < half; x += 16) {
    const __mmask16 m = Mask(half - x);
    const __m128i b = _mm_maskz_loadu_epi8(m, src + x);
    const __m128i lo = _mm_and_si128(b, low4);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), low4);
    _mm512_mask_storeu_ps(dst + x, m, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(lo)));
    _mm512_mask_storeu_ps(dst + half + x, m, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(hi)));
  }
}

// Decodes one row of d elements into dst (d floats), float and fp8 formats (integer rows go
// through DecodeIntCodes). Float32 rows are not copied: the caller reads them in place.
void DecodeRow(KvCacheDtype dtype, const uint8_t* src, int d, float layer_scale, float* dst) {
  switch (dtype) {
    case KvCacheDtype::kBFloat16:
      for (int x = 0; x < d; x += 16) {
        const __m256i h = _mm256_maskz_loadu_epi16(Mask(d - x), src + 2 * x);
        _mm512_mask_storeu_ps(dst + x, Mask(d - x),
                              _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
      }
      return;
    case KvCacheDtype::kFloat16:
      for (int x = 0; x < d; x += 16)
        _mm512_mask_storeu_ps(dst + x, Mask(d - x),
                              _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(Mask(d - x), src + 2 * x)));
      return;
    case KvCacheDtype::kFp8E4m3: {
      // 32 bytes at a time. e4m3 -> fp16 bit pattern: sign-extend each byte to 16 bits and
      // shift left by 7, which puts the 7 magnitude bits under the fp16 exponent (bias 15 vs 7,
      // so the value is 2^-8 of the real one, subnormals included) and copies of the sign into
      // bits 14 and 15; clearing bit 14 leaves sign | magnitude. Then fp16 -> f32 times 256 x
      // layer scale. Bytes 0x7F/0xFF (e4m3fn NaN) become fp16 NaN.
      const __m512 mul = _mm512_set1_ps(256.0f * layer_scale);
      const __m512i keep = _mm512_set1_epi16(static_cast<int16_t>(0xBF80));
      const __m512i nan = _mm512_set1_epi16(0x7E00);
      for (int x = 0; x < d; x += 32) {
        const __m256i b = _mm256_maskz_loadu_epi8(Mask32(d - x), src + x);
        const __mmask32 is_nan = _mm256_cmpeq_epi8_mask(_mm256_and_si256(b, _mm256_set1_epi8(0x7F)),
                                                        _mm256_set1_epi8(0x7F));
        __m512i h = _mm512_and_si512(_mm512_slli_epi16(_mm512_cvtepi8_epi16(b), 7), keep);
        h = _mm512_mask_mov_epi16(h, is_nan, nan);
        StoreF16x32(h, &mul, dst + x, d - x);
      }
      return;
    }
    case KvCacheDtype::kFp8E5m2:
      // e5m2 is the top byte of an fp16.
      for (int x = 0; x < d; x += 32) {
        const __m512i w = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(Mask32(d - x), src + x));
        StoreF16x32(_mm512_slli_epi16(w, 8), nullptr, dst + x, d - x);
      }
      return;
    default:
      return;
  }
}

// The K and V rows of a tile (rows <= kTile, fp16, head_dim 16 * NC) as floats in kb / vb
// ([kTile][16 * NC]), with krow / vrow pointing at them: DecodeRow's conversion, unrolled and
// unmasked. A decode step converts every row it reads once per query head group, so the call
// and masked loop per row DecodeRow costs were most of a long-context decode step's attention.
template <int NC>
inline void F16TileToFloat(const KvLayerView& kv, const int64_t* offsets, int rows, float* kb,
                           float* vb, const float** krow, const float** vrow) {
  for (int j = 0; j < rows; ++j) {
    const uint8_t* k = kv.k + offsets[j];
    const uint8_t* v = kv.v + offsets[j];
    float* kd = kb + j * 16 * NC;
    float* vd = vb + j * 16 * NC;
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      _mm512_storeu_ps(
          kd + 16 * c,
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 32 * c))));
      _mm512_storeu_ps(
          vd + 16 * c,
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 32 * c))));
    }
    krow[j] = kd;
    vrow[j] = vd;
  }
}

// r[j] = sum of the 16 lanes of v[j], j < 16, by a fixed transpose-add tree.
inline __m512 HSum16(const __m512* v) {
  __m512 a[8], b[4];
  for (int i = 0; i < 8; ++i)
    a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  // a[i], per 128-bit lane: [x02, y02, x13, y13] for x = v[2i], y = v[2i+1].
  for (int i = 0; i < 4; ++i)
    b[i] = _mm512_add_ps(_mm512_shuffle_ps(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // b[i], 128-bit lane L: the lane-L sums of v[4i .. 4i+3].
  const __m512 d0 = _mm512_add_ps(_mm512_shuffle_f32x4(b[0], b[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(b[0], b[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 d1 = _mm512_add_ps(_mm512_shuffle_f32x4(b[2], b[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(b[2], b[3], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(d0, d1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(d0, d1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// exp(x) for x <= 0 (scores minus their running max): 2^n x p(r), r = x - n ln2, degree-6
// polynomial (relative error ~1e-7); inputs below -87 give ~1e-38.
inline __m512 Exp(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// 16 scores soft-capped: cap · tanh(s / cap) = cap · sign(s) · (1 - e) / (1 + e) with
// e = exp(-2 |s| / cap) <= 1 (no overflow); ~1e-7 · cap absolute error.
inline __m512 SoftCap16(__m512 s, float cap) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = Exp(_mm512_mul_ps(_mm512_abs_ps(s), _mm512_set1_ps(-2.0f / cap)));
  const __m512 t = _mm512_mul_ps(_mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e)),
                                 _mm512_set1_ps(cap));
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(s), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), sign));
}

// Raw dot products of q (d floats) with n rows, into lanes 0..n-1 (others 0).
template <int NC>
inline __m512 DotsFixed(const float* q, const float* const* rows, int n) {
  __m512 qv[NC];
  for (int c = 0; c < NC; ++c) qv[c] = _mm512_loadu_ps(q + 16 * c);
  __m512 v[kTile];
  for (int j = 0; j < kTile; ++j) {
    if (j < n) {
      __m512 acc = _mm512_mul_ps(qv[0], _mm512_loadu_ps(rows[j]));
      for (int c = 1; c < NC; ++c)
        acc = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(rows[j] + 16 * c), acc);
      v[j] = acc;
    } else {
      v[j] = _mm512_setzero_ps();
    }
  }
  return HSum16(v);
}

inline __m512 DotsGeneric(const float* q, const float* const* rows, int n, int d) {
  __m512 v[kTile];
  for (int j = 0; j < kTile; ++j) {
    __m512 acc = _mm512_setzero_ps();
    if (j < n)
      for (int x = 0; x < d; x += 16) {
        const __mmask16 m = Mask(d - x);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + x),
                              _mm512_maskz_loadu_ps(m, rows[j] + x), acc);
      }
    v[j] = acc;
  }
  return HSum16(v);
}

// dst[x][j] = rows[j][x] for x < 16 * NC, j < 16 (rows past n read as 0): the K tile
// transposed so that a query's 16 scores come from FMAs on whole vectors (DotsTransposed).
// Each 16 x 16 block: pairs interleaved, then quads, then the 128-bit lanes swapped 4 x 4.
template <int NC>
inline void TransposeTile(const float* const* rows, int n, float* dst) {
  for (int cb = 0; cb < NC; ++cb) {
    __m512 r[16], t[16], u[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j)
      r[j] = j < n ? _mm512_loadu_ps(rows[j] + 16 * cb) : _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4i + k], 128-bit lane L: rows 4i..4i+3 at column 4L + k.
#pragma GCC unroll 16
    for (int i = 0; i < 4; ++i) {
      u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
      u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
      u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
      u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    float* out = dst + 16 * 16 * cb;
#pragma GCC unroll 16
    for (int k = 0; k < 4; ++k) {
      const __m512 v0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x44);
      const __m512 v1 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xEE);
      const __m512 v2 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x44);
      const __m512 v3 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xEE);
      _mm512_storeu_ps(out + 16 * (0 + k), _mm512_shuffle_f32x4(v0, v2, 0x88));
      _mm512_storeu_ps(out + 16 * (4 + k), _mm512_shuffle_f32x4(v0, v2, 0xDD));
      _mm512_storeu_ps(out + 16 * (8 + k), _mm512_shuffle_f32x4(v1, v3, 0x88));
      _mm512_storeu_ps(out + 16 * (12 + k), _mm512_shuffle_f32x4(v1, v3, 0xDD));
    }
  }
}

// A load kept in a register: GCC otherwise folds a vector that several FMAs use into each of
// them as a memory operand, loading it once per FMA. The multi-head kernels below are bound by
// loads (two per FMA before they shared them), so each K / V vector is loaded once for all
// heads: Llama-3.2-1B shape, f16 cache, pp512 at depth 4096 on one Zen 4 core, 35.2 -> 57.1
// GFLOP/s with up to four heads per load (medians of 4 alternating runs, docs/BENCHMARKS.md).
inline __m512 LoadShared(const float* p) {
  __m512 v = _mm512_loadu_ps(p);
  asm("" : "+v"(v));
  return v;
}

// The scores of DotsFixed<NC> from the transposed tile kt ([16 * NC][16]) for H query heads
// q[0..H), bit for bit: lane partial l of every position is the same multiply-then-FMA chain
// over c (x = 16c + l), and the 16 partials are added in HSum16's tree, ((S0 + S2) + (S1 +
// S3)) with S_G = (x_4G + x_4G+2) + (x_4G+1 + x_4G+3). Costs 16 * NC FMAs and 15 adds per
// query head and tile instead of HSum16's shuffles, so prefill runs (many query heads per
// tile) use it. The partials are formed a quad (one S_G) at a time, each K-tile vector loaded
// once for the H heads, whose 4 * H chains interleave.
template <int NC, int H>
inline void DotsTransposed(const float* const* q, const float* kt, __m512* out) {
  __m512 sg[H][4];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    __m512 x[H][4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512 k = LoadShared(kt + 16 * (4 * g + i));
      // The _round_ form: GCC may not contract it with the tree's adds into an FMA (with
      // NC = 1 a plain multiply has one use, an add, and -ffp-contract=fast would fuse them).
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h)
        x[h][i] = _mm512_mul_round_ps(_mm512_set1_ps(q[h][4 * g + i]), k, _MM_FROUND_CUR_DIRECTION);
    }
#pragma GCC unroll 8
    for (int c = 1; c < NC; ++c)
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const int xi = 16 * c + 4 * g + i;
        const __m512 k = LoadShared(kt + 16 * xi);
#pragma GCC unroll 4
        for (int h = 0; h < H; ++h) x[h][i] = _mm512_fmadd_ps(_mm512_set1_ps(q[h][xi]), k, x[h][i]);
      }
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
      sg[h][g] = _mm512_add_ps(_mm512_add_ps(x[h][0], x[h][2]), _mm512_add_ps(x[h][1], x[h][3]));
  }
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
    out[h] = _mm512_add_ps(_mm512_add_ps(sg[h][0], sg[h][2]), _mm512_add_ps(sg[h][1], sg[h][3]));
}

// o[x] = o[x] * corr + pz + sum_j p[j] v_j[x] over x < 16 * NC for H query heads over the same
// n rows: one FMA chain per head and element in j order (as the generic loop). Up to four
// vectors per pass over the rows, each V vector loaded once for the H heads, so 4 * H (at
// least NC) independent chains interleave and FMA latency does not bound the loop.
template <int NC, int H>
inline void AccumulateV(float* const* o, const float* const* p, const float* const* vrow, int n,
                        const __m512* corr, const __m512* pz) {
  constexpr int kPass = NC < 4 ? NC : 4;
#pragma GCC unroll 2
  for (int c0 = 0; c0 < NC; c0 += kPass) {
    __m512 acc[H][kPass];
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
      for (int c = 0; c < kPass; ++c)
        acc[h][c] = _mm512_fmadd_ps(_mm512_loadu_ps(o[h] + 16 * (c0 + c)), corr[h], pz[h]);
    for (int j = 0; j < n; ++j) {
      __m512 pj[H];
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h) pj[h] = _mm512_set1_ps(p[h][j]);
#pragma GCC unroll 4
      for (int c = 0; c < kPass; ++c) {
        const __m512 v = LoadShared(vrow[j] + 16 * (c0 + c));
#pragma GCC unroll 4
        for (int h = 0; h < H; ++h) acc[h][c] = _mm512_fmadd_ps(pj[h], v, acc[h][c]);
      }
    }
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
      for (int c = 0; c < kPass; ++c) _mm512_storeu_ps(o[h] + 16 * (c0 + c), acc[h][c]);
  }
}

// The two kernels above for H = 4, 2 or 1 heads and head_dim 16 * NC.
template <int NC>
inline void DotsTransposedHeads(int h, const float* const* q, const float* kt, __m512* out) {
  if (h == 4) {
    DotsTransposed<NC, 4>(q, kt, out);
  } else if (h == 2) {
    DotsTransposed<NC, 2>(q, kt, out);
  } else {
    DotsTransposed<NC, 1>(q, kt, out);
  }
}
template <int NC>
inline void AccumulateVHeads(int h, float* const* o, const float* const* p,
                             const float* const* vrow, int n, const __m512* corr,
                             const __m512* pz) {
  if (h == 4) {
    AccumulateV<NC, 4>(o, p, vrow, n, corr, pz);
  } else if (h == 2) {
    AccumulateV<NC, 2>(o, p, vrow, n, corr, pz);
  } else {
    AccumulateV<NC, 1>(o, p, vrow, n, corr, pz);
  }
}

}  // namespace

void AttendAvx512(const AttendArgs& a) {
  const AttentionShape& s = *a.shape;
  const KvLayerView& kv = *a.kv;
  const int group = s.num_heads / s.num_kv_heads;
  const int d = s.head_dim;
  const bool direct = kv.dtype == KvCacheDtype::kFloat32;
  // Integer rows (x = code * scale + zero per row) are decoded to their codes only, and the
  // per-row scale and zero are applied per tile of 16 positions:
  //   q.(s_j c_j + z_j) = s_j (q.c_j) + z_j sum(q)                  (scores)
  //   sum_j p_j (s_j c_j + z_j) = sum_j (p_j s_j) c_j + sum_j p_j z_j  (V accumulation)
  const bool int_rows = kv.dtype == KvCacheDtype::kInt8 || kv.dtype == KvCacheDtype::kInt4;
  thread_local std::vector<float> qsum;  // [query][group]
  int max_end = a.begin;
  for (int qi = 0; qi < a.num_queries; ++qi) {
    const AttendQuery& aq = a.queries[qi];
    max_end = std::max(max_end, aq.end);
    for (int g = 0; g < group; ++g) {
      aq.m[g] = -std::numeric_limits<float>::infinity();
      aq.l[g] = 0.0f;
      std::fill_n(aq.acc + int64_t{g} * d, d, 0.0f);
    }
  }
  if (int_rows) {
    qsum.resize(static_cast<size_t>(a.num_queries) * group);
    for (int qi = 0; qi < a.num_queries; ++qi)
      for (int g = 0; g < group; ++g) {
        __m512 acc = _mm512_setzero_ps();
        for (int x = 0; x < d; x += 16)
          acc = _mm512_add_ps(
              acc, _mm512_maskz_loadu_ps(Mask(d - x), a.queries[qi].q + int64_t{g} * d + x));
        qsum[qi * group + g] = kernels_internal::avx512::HSum(acc);
      }
  }
  // fp16 scale / zero of the tile's K and V rows (0 past the tile's end).
  alignas(32) uint16_t ks_h[kTile], kz_h[kTile], vs_h[kTile], vz_h[kTile];
  // Decoded tile scratch: [kTile][d] for K and for V (a few KiB, stays in L1).
  thread_local std::vector<float> kbuf, vbuf;
  if (!direct && static_cast<int>(kbuf.size()) < kTile * d) {
    kbuf.resize(static_cast<size_t>(kTile) * d);
    vbuf.resize(static_cast<size_t>(kTile) * d);
  }
  // Transposed K tile ([d][16]) for DotsTransposed; head_dim 16/32/64/128 only.
  const bool fixed_dim = d == 16 || d == 32 || d == 64 || d == 128;
  thread_local std::vector<float> kt;
  if (fixed_dim && static_cast<int>(kt.size()) < kTile * d)
    kt.resize(static_cast<size_t>(kTile) * d);
  // fp16 rows of a fixed head_dim: the whole tile converted by F16TileToFloat.
  const bool f16_tile = fixed_dim && kv.dtype == KvCacheDtype::kFloat16;
  const __m512 vscale = _mm512_set1_ps(s.scale);
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const float* krow[kTile];
  const float* vrow[kTile];
  // (query, head) pairs that see the current tile.
  struct HeadRow {
    int qi, g;
  };
  thread_local std::vector<HeadRow> head_rows;
  if (static_cast<int>(head_rows.size()) < a.num_queries * group)
    head_rows.resize(static_cast<size_t>(a.num_queries) * group);
  for (int j0 = a.begin; j0 < max_end; j0 += kTile) {
    // Rows of this tile that some query of the run sees; each query uses its own prefix.
    const int rows = std::min(kTile, max_end - j0);
    PrefetchKvRows(s, kv, a.block_table, j0 + kTile, std::min(kTile, max_end - (j0 + kTile)),
                   a.kv_head);
    int64_t offsets[kTile];
    TileRowOffsets(s, kv, a.block_table, j0, rows, a.kv_head, offsets);
    if (f16_tile) {
      switch (d) {
        case 16:
          F16TileToFloat<1>(kv, offsets, rows, kbuf.data(), vbuf.data(), krow, vrow);
          break;
        case 32:
          F16TileToFloat<2>(kv, offsets, rows, kbuf.data(), vbuf.data(), krow, vrow);
          break;
        case 64:
          F16TileToFloat<4>(kv, offsets, rows, kbuf.data(), vbuf.data(), krow, vrow);
          break;
        default:
          F16TileToFloat<8>(kv, offsets, rows, kbuf.data(), vbuf.data(), krow, vrow);
          break;
      }
    } else {
      for (int j = 0; j < rows; ++j) {
        const int64_t off = offsets[j];
        if (direct) {
          krow[j] = reinterpret_cast<const float*>(kv.k + off);
          vrow[j] = reinterpret_cast<const float*>(kv.v + off);
        } else {
          if (int_rows) {
            DecodeIntCodes(kv.dtype, kv.k + off, d, &kbuf[j * d], &ks_h[j], &kz_h[j]);
            DecodeIntCodes(kv.dtype, kv.v + off, d, &vbuf[j * d], &vs_h[j], &vz_h[j]);
          } else {
            DecodeRow(kv.dtype, kv.k + off, d, kv.k_scale, &kbuf[j * d]);
            DecodeRow(kv.dtype, kv.v + off, d, kv.v_scale, &vbuf[j * d]);
          }
          krow[j] = &kbuf[j * d];
          vrow[j] = &vbuf[j * d];
        }
      }
    }
    __m512 tile_k_s = _mm512_setzero_ps(), tile_k_z = tile_k_s, tile_v_s = tile_k_s,
           tile_v_z = tile_k_s;
    if (int_rows) {
      for (int j = rows; j < kTile; ++j) ks_h[j] = kz_h[j] = vs_h[j] = vz_h[j] = 0;
      tile_k_s = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(ks_h)));
      tile_k_z = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(kz_h)));
      tile_v_s = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(vs_h)));
      tile_v_z = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(vz_h)));
    }
    // Query heads that see this tile: with enough of them, transpose the K tile once and
    // score with DotsTransposed (same bits as DotsFixed, fewer instructions).
    int active = 0;
    for (int qi = 0; qi < a.num_queries; ++qi) active += a.queries[qi].end > j0;
    const bool transposed = fixed_dim && active * group >= kTransposeMinHeads;
    if (transposed) {
      switch (d) {
        case 16:
          TransposeTile<1>(krow, rows, kt.data());
          break;
        case 32:
          TransposeTile<2>(krow, rows, kt.data());
          break;
        case 64:
          TransposeTile<4>(krow, rows, kt.data());
          break;
        default:
          TransposeTile<8>(krow, rows, kt.data());
          break;
      }
    }
    // The tile's query heads in batches of kHeadBatch, each batch in three passes (scores,
    // softmax bookkeeping, V accumulation) over independent heads: one head's work is a long
    // dependent chain (dots -> max -> exp -> sums -> V FMAs) that the core cannot overlap with
    // the next head's across a window of a few hundred instructions; batching puts
    // independent heads next to each other. Per head the operations and their order are the
    // same as for a head alone, so results do not depend on the batch.
    int num_rows = 0;
    for (int qi = 0; qi < a.num_queries; ++qi) {
      if (a.queries[qi].end <= j0) continue;
      for (int g = 0; g < group; ++g) head_rows[num_rows++] = {qi, g};
    }
    for (int b0 = 0; b0 < num_rows; b0 += kHeadBatch) {
      const int nb = std::min(kHeadBatch, num_rows - b0);
      const HeadRow* hr = &head_rows[b0];
      __m512 sc[kHeadBatch];
      alignas(64) float pb[kHeadBatch][kTile];
      float corr[kHeadBatch], pz[kHeadBatch];
      int nrows[kHeadBatch];
      // Raw scores from the transposed tile, up to four heads at a time.
      int scored = 0;
      while (transposed && scored < nb) {
        const int h = nb - scored >= 4 ? 4 : nb - scored >= 2 ? 2 : 1;
        const float* qs[4];
        for (int i = 0; i < h; ++i)
          qs[i] = a.queries[hr[scored + i].qi].q + int64_t{hr[scored + i].g} * d;
        switch (d) {
          case 16:
            DotsTransposedHeads<1>(h, qs, kt.data(), &sc[scored]);
            break;
          case 32:
            DotsTransposedHeads<2>(h, qs, kt.data(), &sc[scored]);
            break;
          case 64:
            DotsTransposedHeads<4>(h, qs, kt.data(), &sc[scored]);
            break;
          default:
            DotsTransposedHeads<8>(h, qs, kt.data(), &sc[scored]);
            break;
        }
        scored += h;
      }
      for (int b = 0; b < nb; ++b) {
        const AttendQuery& aq = a.queries[hr[b].qi];
        const int n = std::min(kTile, aq.end - j0);
        nrows[b] = n;
        const __mmask16 valid = Mask(n);
        const float* q = aq.q + int64_t{hr[b].g} * d;
        __m512 s_b;
        if (transposed) {
          s_b = sc[b];
        } else {
          switch (d) {
            case 16:
              s_b = DotsFixed<1>(q, krow, n);
              break;
            case 32:
              s_b = DotsFixed<2>(q, krow, n);
              break;
            case 64:
              s_b = DotsFixed<4>(q, krow, n);
              break;
            case 128:
              s_b = DotsFixed<8>(q, krow, n);
              break;
            default:
              s_b = DotsGeneric(q, krow, n, d);
              break;
          }
        }
        // Lanes past this query's rows are 0, as when the query runs alone.
        if (int_rows)
          s_b = _mm512_fmadd_ps(s_b, _mm512_maskz_mov_ps(valid, tile_k_s),
                                _mm512_mul_ps(_mm512_maskz_mov_ps(valid, tile_k_z),
                                              _mm512_set1_ps(qsum[hr[b].qi * group + hr[b].g])));
        s_b = _mm512_mul_ps(s_b, vscale);
        if (s.softcap > 0.0f) s_b = SoftCap16(s_b, s.softcap);
        sc[b] = _mm512_mask_mov_ps(neg_inf, valid, s_b);
      }
      for (int b = 0; b < nb; ++b) {
        const AttendQuery& aq = a.queries[hr[b].qi];
        const int g = hr[b].g;
        const __mmask16 valid = Mask(nrows[b]);
        const float mx = std::max(aq.m[g], _mm512_reduce_max_ps(sc[b]));
        const __m512 e = _mm512_maskz_mov_ps(valid, Exp(_mm512_sub_ps(sc[b], _mm512_set1_ps(mx))));
        // Once the running max has settled most tiles leave it unchanged: the correction is
        // then Exp(0), exactly 1 (n = 0, r = 0, p(0) = 1, 2^0), so skip the polynomial.
        corr[b] = aq.m[g] == -std::numeric_limits<float>::infinity() ? 0.0f
                  : aq.m[g] == mx                                    ? 1.0f
                                  : _mm512_cvtss_f32(Exp(_mm512_set1_ps(aq.m[g] - mx)));
        aq.l[g] = aq.l[g] * corr[b] + kernels_internal::avx512::HSum(e);
        aq.m[g] = mx;
        // Integer V: weights p_j s_j on the codes, plus sum_j p_j z_j on every channel.
        pz[b] = int_rows ? kernels_internal::avx512::HSum(
                               _mm512_mul_ps(e, _mm512_maskz_mov_ps(valid, tile_v_z)))
                         : 0.0f;
        _mm512_store_ps(pb[b],
                        int_rows ? _mm512_mul_ps(e, _mm512_maskz_mov_ps(valid, tile_v_s)) : e);
      }
      for (int b = 0; b < nb;) {
        const int n = nrows[b];
        // Up to four consecutive heads over the same rows (they differ only on the diagonal).
        int h = 1;
        if (fixed_dim) {
          while (h < 4 && b + h < nb && nrows[b + h] == n) ++h;
          if (h == 3) h = 2;
        }
        float* os[4];
        const float* ps[4];
        __m512 vcorr[4], vpz[4];
        for (int i = 0; i < h; ++i) {
          os[i] = a.queries[hr[b + i].qi].acc + int64_t{hr[b + i].g} * d;
          ps[i] = pb[b + i];
          vcorr[i] = _mm512_set1_ps(corr[b + i]);
          vpz[i] = _mm512_set1_ps(pz[b + i]);
        }
        b += h;
        switch (d) {
          case 16:
            AccumulateVHeads<1>(h, os, ps, vrow, n, vcorr, vpz);
            continue;
          case 32:
            AccumulateVHeads<2>(h, os, ps, vrow, n, vcorr, vpz);
            continue;
          case 64:
            AccumulateVHeads<4>(h, os, ps, vrow, n, vcorr, vpz);
            continue;
          case 128:
            AccumulateVHeads<8>(h, os, ps, vrow, n, vcorr, vpz);
            continue;
          default:
            break;
        }
        float* o = os[0];
        const float* p = ps[0];
        for (int x = 0; x < d; x += 16) {
          const __mmask16 m = Mask(d - x);
          __m512 acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, o + x), vcorr[0], vpz[0]);
          for (int j = 0; j < n; ++j)
            acc = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_maskz_loadu_ps(m, vrow[j] + x), acc);
          _mm512_mask_storeu_ps(o + x, m, acc);
        }
      }
    }
  }
}

}  // namespace pagellm::attention_internal
