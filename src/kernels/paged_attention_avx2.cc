// AVX2 attention kernel (machines without AVX-512): the same work split, tiles and online
// softmax as the AVX-512 kernel, with 8-lane vectors. K/V rows of a 16-position tile are
// decoded once per query run (16-bit, int8 and int4 rows with AVX2, fp8 with the reference
// decoder), then each query head scores the tile with one FMA chain per position and
// accumulates V with one chain per 8 channels. Per query its arithmetic does not depend on
// the run it shares, so results stay batch-invariant; they are not bit-equal to the AVX-512
// kernel's (another reduction tree), which no contract asks for.
#include "kernels/simd_avx2.h"  // first: silences GCC 12 false -Wuninitialized in intrinsics

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kv_quant.h"
#include "kernels/paged_attention.h"

namespace pagellm::attention_internal {
namespace {

using kernels_internal::avx2::Exp;
using kernels_internal::avx2::HSum8;
using kernels_internal::avx2::LoadU16;
using kernels_internal::avx2::TailMask8;

inline float HalfToFloat(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

// Decodes one stored row of d elements (the stored basis: rotation is the caller's) into dst.
void DecodeRowAvx2(KvCacheDtype dtype, const uint8_t* src, int d, float layer_scale, float* dst) {
  const int body = d & ~7;
  switch (dtype) {
    case KvCacheDtype::kFloat16:
      for (int x = 0; x < body; x += 8)
        _mm256_storeu_ps(
            dst + x,
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * x))));
      for (int x = body; x < d; ++x) dst[x] = HalfToFloat(LoadU16(src + 2 * x));
      return;
    case KvCacheDtype::kBFloat16:
      for (int x = 0; x < body; x += 8) {
        const __m256i w =
            _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * x)));
        _mm256_storeu_ps(dst + x, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
      }
      for (int x = body; x < d; ++x) {
        const uint32_t bits = uint32_t{LoadU16(src + 2 * x)} << 16;
        std::memcpy(dst + x, &bits, 4);
      }
      return;
    case KvCacheDtype::kInt8: {
      const __m256 scale = _mm256_set1_ps(HalfToFloat(LoadU16(src + d)));
      const __m256 zero = _mm256_set1_ps(HalfToFloat(LoadU16(src + d + 2)));
      for (int x = 0; x < body; x += 8) {
        const __m256i c =
            _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + x)));
        _mm256_storeu_ps(dst + x, _mm256_fmadd_ps(_mm256_cvtepi32_ps(c), scale, zero));
      }
      for (int x = body; x < d; ++x)
        dst[x] =
            std::fma(static_cast<float>(src[x]), _mm256_cvtss_f32(scale), _mm256_cvtss_f32(zero));
      return;
    }
    case KvCacheDtype::kInt4: {
      // Byte i holds element i (low nibble) and element i + d/2 (high nibble).
      const int half = d / 2;
      const __m256 scale = _mm256_set1_ps(HalfToFloat(LoadU16(src + half)));
      const __m256 zero = _mm256_set1_ps(HalfToFloat(LoadU16(src + half + 2)));
      const int half_body = half & ~7;
      const __m128i low4 = _mm_set1_epi8(0x0F);
      for (int x = 0; x < half_body; x += 8) {
        const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + x));
        const __m256i lo = _mm256_cvtepu8_epi32(_mm_and_si128(b, low4));
        const __m256i hi = _mm256_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(b, 4), low4));
        _mm256_storeu_ps(dst + x, _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), scale, zero));
        _mm256_storeu_ps(dst + half + x, _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), scale, zero));
      }
      for (int x = half_body; x < half; ++x) {
        dst[x] = std::fma(static_cast<float>(src[x] & 0xF), _mm256_cvtss_f32(scale),
                          _mm256_cvtss_f32(zero));
        dst[x + half] = std::fma(static_cast<float>(src[x] >> 4), _mm256_cvtss_f32(scale),
                                 _mm256_cvtss_f32(zero));
      }
      return;
    }
    default:  // fp8 (and anything else): the reference decoder
      DequantizeKvRow(dtype, src, d, layer_scale, dst);
      return;
  }
}

// q . row over d elements: 8-lane FMA chain, then HSum8.
inline float Dot(const float* q, const float* row, int d) {
  const int body = d & ~7;
  __m256 acc = _mm256_setzero_ps();
  for (int x = 0; x < body; x += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + x), _mm256_loadu_ps(row + x), acc);
  if (body < d) {
    const __m256i m = TailMask8(d - body);
    acc = _mm256_fmadd_ps(_mm256_maskload_ps(q + body, m), _mm256_maskload_ps(row + body, m), acc);
  }
  return HSum8(acc);
}

// 8 scores soft-capped: cap · tanh(s / cap) = cap · sign(s) · (1 - e) / (1 + e) with
// e = exp(-2 |s| / cap) <= 1 (no overflow); ~1e-7 · cap absolute error.
inline __m256 SoftCap8(__m256 s, float cap) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = Exp(_mm256_mul_ps(_mm256_andnot_ps(sign, s), _mm256_set1_ps(-2.0f / cap)));
  const __m256 t = _mm256_mul_ps(_mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e)),
                                 _mm256_set1_ps(cap));
  return _mm256_or_ps(t, _mm256_and_ps(sign, s));
}

}  // namespace

void AttendAvx2(const AttendArgs& a) {
  const AttentionShape& s = *a.shape;
  const KvLayerView& kv = *a.kv;
  const int group = s.num_heads / s.num_kv_heads;
  const int d = s.head_dim;
  const bool direct = kv.dtype == KvCacheDtype::kFloat32;
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
  thread_local std::vector<float> kbuf, vbuf;
  if (!direct && static_cast<int>(kbuf.size()) < kTile * d) {
    kbuf.resize(static_cast<size_t>(kTile) * d);
    vbuf.resize(static_cast<size_t>(kTile) * d);
  }
  const float* krow[kTile];
  const float* vrow[kTile];
  alignas(32) float sc[kTile];
  const int body = d & ~7;
  for (int j0 = a.begin; j0 < max_end; j0 += kTile) {
    const int rows = std::min(kTile, max_end - j0);
    PrefetchKvRows(s, kv, a.block_table, j0 + kTile, std::min(kTile, max_end - (j0 + kTile)),
                   a.kv_head);
    int64_t offsets[kTile];
    TileRowOffsets(s, kv, a.block_table, j0, rows, a.kv_head, offsets);
    for (int j = 0; j < rows; ++j) {
      const int64_t off = offsets[j];
      if (direct) {
        krow[j] = reinterpret_cast<const float*>(kv.k + off);
        vrow[j] = reinterpret_cast<const float*>(kv.v + off);
      } else {
        DecodeRowAvx2(kv.dtype, kv.k + off, d, kv.k_scale, &kbuf[j * d]);
        DecodeRowAvx2(kv.dtype, kv.v + off, d, kv.v_scale, &vbuf[j * d]);
        krow[j] = &kbuf[j * d];
        vrow[j] = &vbuf[j * d];
      }
    }
    for (int qi = 0; qi < a.num_queries; ++qi) {
      const AttendQuery& aq = a.queries[qi];
      if (aq.end <= j0) continue;
      const int n = std::min(kTile, aq.end - j0);
      for (int g = 0; g < group; ++g) {
        const float* q = aq.q + int64_t{g} * d;
        float mx = aq.m[g];
        for (int j = 0; j < n; ++j) sc[j] = Dot(q, krow[j], d) * s.scale;
        if (s.softcap > 0.0f) {
          _mm256_store_ps(sc, SoftCap8(_mm256_load_ps(sc), s.softcap));
          _mm256_store_ps(sc + 8, SoftCap8(_mm256_load_ps(sc + 8), s.softcap));
        }
        for (int j = 0; j < n; ++j) mx = std::max(mx, sc[j]);
        for (int j = n; j < kTile; ++j) sc[j] = mx;  // exp(0), zeroed below
        const __m256 vmx = _mm256_set1_ps(mx);
        const __m256 e0 = Exp(_mm256_sub_ps(_mm256_load_ps(sc), vmx));
        const __m256 e1 = Exp(_mm256_sub_ps(_mm256_load_ps(sc + 8), vmx));
        _mm256_store_ps(sc, e0);
        _mm256_store_ps(sc + 8, e1);
        for (int j = n; j < kTile; ++j) sc[j] = 0.0f;
        const float corr = aq.m[g] == -std::numeric_limits<float>::infinity()
                               ? 0.0f
                               : _mm256_cvtss_f32(Exp(_mm256_set1_ps(aq.m[g] - mx)));
        aq.l[g] = aq.l[g] * corr + HSum8(_mm256_add_ps(_mm256_load_ps(sc), _mm256_load_ps(sc + 8)));
        aq.m[g] = mx;
        const __m256 vcorr = _mm256_set1_ps(corr);
        float* o = aq.acc + int64_t{g} * d;
        int x = 0;
        for (; x + 32 <= body; x += 32) {  // four independent chains
          __m256 c0 = _mm256_mul_ps(_mm256_loadu_ps(o + x), vcorr);
          __m256 c1 = _mm256_mul_ps(_mm256_loadu_ps(o + x + 8), vcorr);
          __m256 c2 = _mm256_mul_ps(_mm256_loadu_ps(o + x + 16), vcorr);
          __m256 c3 = _mm256_mul_ps(_mm256_loadu_ps(o + x + 24), vcorr);
          for (int j = 0; j < n; ++j) {
            const __m256 pj = _mm256_set1_ps(sc[j]);
            c0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vrow[j] + x), c0);
            c1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vrow[j] + x + 8), c1);
            c2 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vrow[j] + x + 16), c2);
            c3 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vrow[j] + x + 24), c3);
          }
          _mm256_storeu_ps(o + x, c0);
          _mm256_storeu_ps(o + x + 8, c1);
          _mm256_storeu_ps(o + x + 16, c2);
          _mm256_storeu_ps(o + x + 24, c3);
        }
        for (; x < body; x += 8) {
          __m256 c = _mm256_mul_ps(_mm256_loadu_ps(o + x), vcorr);
          for (int j = 0; j < n; ++j)
            c = _mm256_fmadd_ps(_mm256_set1_ps(sc[j]), _mm256_loadu_ps(vrow[j] + x), c);
          _mm256_storeu_ps(o + x, c);
        }
        for (; x < d; ++x) {
          float c = o[x] * corr;
          for (int j = 0; j < n; ++j) c = std::fma(sc[j], vrow[j][x], c);
          o[x] = c;
        }
      }
    }
  }
}

}  // namespace pagellm::attention_internal
