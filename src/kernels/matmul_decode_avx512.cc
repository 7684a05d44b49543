// AVX-512 (BW + VNNI) kernels of the decoding MatMul family (matmul_decode_internal.h). The
// super-block formats decode 4 rows at a time and take 64 codes per step: vpmaddubsw pair sums
// of 4 sub-blocks, whose scales a word permute lays out, then vpdpwssd (VNNI) multiplies and
// accumulates them in one instruction; each activation load serves the 4 rows. The 32-element block
// formats and the code decoders use the shared 256-bit code (matmul_decode_simd.h), compiled here
// with the AVX-512 flags. Results equal the scalar level's bit for bit.
#include "kernels/simd_avx512.h"
// (simd_avx512.h first: it sets the diagnostics <immintrin.h> needs.)
#include "kernels/matmul_decode_simd.h"

namespace pagellm::kernels_internal::avx512 {
namespace {

// Lane r = the sum of the int32 lanes of v[r] (exact, any order).
inline __m128i ReduceLanes4(const __m512i (&v)[4]) {
  __m128i x[4];
  for (int r = 0; r < 4; ++r) {
    const __m256i h =
        _mm256_add_epi32(_mm512_castsi512_si256(v[r]), _mm512_extracti64x4_epi64(v[r], 1));
    x[r] = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  }
  return _mm_hadd_epi32(_mm_hadd_epi32(x[0], x[1]), _mm_hadd_epi32(x[2], x[3]));
}

// Float s of the array at `offset` of each of the 4 decoded rows.
inline __m128 RowValues4(const uint8_t* const (&dec)[4], int64_t offset, int64_t s) {
  float v[4];
  for (int r = 0; r < 4; ++r) std::memcpy(&v[r], dec[r] + offset + 4 * s, 4);
  return _mm_loadu_ps(v);
}

// kRows decoded rows (dec[r]) against one token: each activation chunk is loaded once for all
// rows. Per row the integer sums and fp32 steps are those of the scalar reference.
template <DType kType, int kRows>
void DotSuper(const uint8_t* const (&dec)[kRows], const DecodedRowLayout& l, const uint8_t* act,
              const Q8KActsLayout& al, float (&y)[kRows]) {
  constexpr bool kUnsigned =
      kType == DType::kQ2_K || kType == DType::kQ4_K || kType == DType::kQ5_K;
  // Step i covers sub-blocks 4i..4i+3; word w of its scale register is scale 4i + w / 8.
  __m512i idx[4];
  for (int i = 0; i < 4; ++i) {
    alignas(64) int16_t w[32];
    for (int j = 0; j < 32; ++j) w[j] = static_cast<int16_t>(4 * i + j / 8);
    idx[i] = _mm512_load_si512(w);
  }
  float acc[kRows] = {};
  [[maybe_unused]] __m128 acc4 = _mm_setzero_ps();
  for (int64_t s = 0; s < l.blocks; ++s) {
    __m512i sc[kRows], isum[kRows];
    for (int r = 0; r < kRows; ++r) {
      sc[r] = _mm512_castsi256_si512(
          _mm256_load_si256(reinterpret_cast<const __m256i*>(dec[r] + l.sc_offset + 32 * s)));
      isum[r] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512i xv = _mm512_loadu_si512(act + 256 * s + 64 * i);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const __m512i qv = _mm512_loadu_si512(dec[r] + 256 * s + 64 * i);
        __m512i pairs;
        if constexpr (kUnsigned) {
          pairs = _mm512_maddubs_epi16(qv, xv);
        } else {
          // |q| times x with q's sign (vpsignb has no 512-bit form).
          const __m512i xs =
              _mm512_mask_sub_epi8(xv, _mm512_movepi8_mask(qv), _mm512_setzero_si512(), xv);
          pairs = _mm512_maddubs_epi16(_mm512_abs_epi8(qv), xs);
        }
        isum[r] = _mm512_dpwssd_epi32(isum[r], pairs, _mm512_permutexvar_epi16(idx[i], sc[r]));
      }
    }
    float dx;
    std::memcpy(&dx, act + al.d_offset + 4 * s, 4);
    if constexpr (kRows == 4) {
      // The 4 rows' fp32 steps in the lanes of one register (the same fma per lane).
      const __m128 dx4 = _mm_set1_ps(dx);
      acc4 = _mm_fmadd_ps(_mm_cvtepi32_ps(ReduceLanes4(isum)),
                          _mm_mul_ps(RowValues4(dec, l.d_offset, s), dx4), acc4);
      if constexpr (DecodeTraits<kType>::kHasMin) {
        const __m256i bsum =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(act + al.bsum_offset + 32 * s));
        __m512i prod[4];
        for (int r = 0; r < 4; ++r) {
          prod[r] = _mm512_castsi256_si512(_mm256_madd_epi16(
              _mm256_load_si256(reinterpret_cast<const __m256i*>(dec[r] + l.mn_offset + 32 * s)),
              bsum));
        }
        acc4 = _mm_fmadd_ps(_mm_cvtepi32_ps(ReduceLanes4(prod)),
                            _mm_mul_ps(RowValues4(dec, l.m_offset, s), dx4), acc4);
      }
    } else {
      for (int r = 0; r < kRows; ++r) {
        const auto* d = reinterpret_cast<const float*>(dec[r] + l.d_offset);
        acc[r] = std::fma(static_cast<float>(_mm512_reduce_add_epi32(isum[r])), d[s] * dx, acc[r]);
        if constexpr (DecodeTraits<kType>::kHasMin) {
          const auto* m = reinterpret_cast<const float*>(dec[r] + l.m_offset);
          const int32_t s2 = MinSum(reinterpret_cast<const int16_t*>(dec[r] + l.mn_offset + 32 * s),
                                    act + al.bsum_offset + 32 * s);
          acc[r] = std::fma(static_cast<float>(s2), m[s] * dx, acc[r]);
        }
      }
    }
  }
  if constexpr (kRows == 4) _mm_storeu_ps(acc, acc4);
  for (int r = 0; r < kRows; ++r) y[r] = acc[r];
}

// Super-block formats: rows in groups of kGroup, decoded into kGroup scratch slots, then every
// token of the block against the group (the activation row is read once per group).
constexpr int kGroup = 4;

template <DType kType>
void SuperBlockRows(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const WeightMatrix& w = *a.w;
  const DecodedRowLayout l = GetDecodedRowLayout(w.cols, true);
  const Q8KActsLayout al = GetQ8KActsLayout(w.cols);
  uint8_t* scratch = DecodeScratch(kGroup * l.bytes);
  int64_t r = r0;
  for (; r + kGroup <= r1; r += kGroup) {
    const uint8_t* dec[kGroup];
    for (int i = 0; i < kGroup; ++i) {
      DecodeRowSimd<kType>(w.row(r + i), w.cols, l, scratch + i * l.bytes);
      dec[i] = scratch + i * l.bytes;
    }
    for (int64_t t = t0; t < t1; ++t) {
      float y[kGroup];
      DotSuper<kType, kGroup>(dec, l, a.qx + t * al.bytes, al, y);
      for (int i = 0; i < kGroup; ++i) a.y[t * w.rows + r + i] = y[i];
    }
  }
  for (; r < r1; ++r) {
    DecodeRowSimd<kType>(w.row(r), w.cols, l, scratch);
    const uint8_t* dec[1] = {scratch};
    for (int64_t t = t0; t < t1; ++t) {
      float y[1];
      DotSuper<kType, 1>(dec, l, a.qx + t * al.bytes, al, y);
      a.y[t * w.rows + r] = y[0];
    }
  }
}

}  // namespace

template <DType kType>
void MatMulDecodeBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  if constexpr (DecodeTraits<kType>::kSuper) {
    SuperBlockRows<kType>(a, r0, r1, t0, t1);
  } else {
    const QuantActsLayout al = GetQuantActsLayout(a.w->cols);
    DecodeAndDot<kType>(a, r0, r1, t0, t1, DecodeRowSimd<kType>,
                        [&](const uint8_t* dec, const DecodedRowLayout& l, const uint8_t* act) {
                          return Dot32Simd<kType>(dec, l, al.nb, act, al);
                        });
  }
}

#define PAGELLM_DECODE_KERNEL(T) \
  template void MatMulDecodeBlock<T>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
PAGELLM_FOR_EACH_DECODE_TYPE(PAGELLM_DECODE_KERNEL)
#undef PAGELLM_DECODE_KERNEL

}  // namespace pagellm::kernels_internal::avx512
