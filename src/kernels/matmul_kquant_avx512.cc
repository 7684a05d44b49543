// AVX-512 VNNI MatMul over the packed copy of Q4_K / Q5_K / Q6_K / IQ4_XS matrices
// (kquant_packed.h), against Q8_K-style activations (matmul_decode_internal.h, Q8KActs).
//
// One register holds 16 rows, one int32 lane each. Per token and 32-element unit j of a
// super-block, the unit's 8 code registers (4 elements of a row per lane, unpacked from the
// planes of kquant_packed.h) go through vpdpbusd, and the partial sums are multiplied by the
// sub-block scales in the lanes and summed into S1, by one of two paths with the same sums:
// 16-element chains times vpmulld, or vpdpwssd of partial sums that fit int16 (Q4_K each
// 16-element half's sum, Q5_K 8 elements' sums, Q6_K 4 elements' sums, two in a lane against
// the pair of scales, and IQ4_XS, whose sums do not fit, each unit's sum split into its low
// byte and the rest against (sc, 256 sc)). vpdpwssd made the prefill kernels (tiles of 4
// tokens, bound by arithmetic) 1.2-1.6x faster, and Q4_K's one-token decode no slower; for
// the other types' one-token decode, which streams from memory, it read the stream slower
// (Q6_K 0.73-0.98x), so that case keeps vpmulld (GroupTokens' kMulld). Offsets of the unsigned
// codes come back through the activations' 16-element sums (bsum): Q6_K -32 * sum_j sc_j * bsum_j,
// IQ4_XS -128 * sum_j sc_j * bsum32_j, one vpdpwssd per pair of sub-blocks; Q4_K / Q5_K's min term
// S2 = sum_j mn_j * bsum32_j the same way. The fp32 step per super-block is the reference's,
//   acc = fma(float(S1), d * dx, acc);  with a min: acc = fma(float(S2), m * dx, acc)
// and the integer sums are exact, so every lane equals the scalar reference bit for bit, for
// any batch size and row split. Where the CPU has GFNI, Q5_K moves each code's fifth bit into
// place with one vgf2p8affineqb instead of a shift and a mask (5 operations per register pair
// instead of 6-7: its L2-resident one-token rate 74-76 -> 82-90 GB/s, prefill +5-12%; Q6_K's
// lo4 high nibbles taken the same way measured within noise, so Q6_K keeps shift and mask).
// Where it has AVX512-VBMI, IQ4_XS looks its codes up with vpermb, which reads only the low 6
// bits of each index byte, from the 16-entry table repeated 4 times: no nibble masks (3
// operations per register pair instead of 5). Tiles
// of up to kTile tokens each stream the group once (a prefill group, 16 rows x cols, is
// L1/L2-resident after the first tile).
#include "kernels/simd_avx512.h"
// (simd_avx512.h first: it sets the diagnostics <immintrin.h> needs.)
#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "base/cpu_features.h"
#include "kernels/kernel_tuning.h"
#include "kernels/kquant_packed.h"
#include "kernels/matmul_decode_internal.h"

namespace pagellm::kernels_internal::avx512 {
namespace {

// Tokens per pass over a packed group. Prefill (GFLOP/s of gemm Q4_K 2048x2048 n64, 1 thread,
// alternating runs): 4 tokens unpacking every pass ~110; a group unpacked once into a
// one-byte-per-weight panel swept by 8-token tiles ~50 (spills) or token by token ~70-85.
constexpr int kTile = 4;
// Software prefetch distance of the weight stream (kernel_tuning.h: kquant_prefetch; the L2 choice
// is the Q4_0 kernels', matmul_quant_avx512.cc).
const int64_t kPrefetchBytes = GetKernelTuning().kquant_prefetch_bytes;
const bool kPrefetchToL2 = GetKernelTuning().quant_prefetch_l2;

inline int32_t LoadI32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline __m512i Load512(const uint8_t* p) {
  return _mm512_load_si512(p);
}

// Low / high int16 of each int32 lane of w, sign-extended.
inline __m512i LowHalves(__m512i w) {
  return _mm512_srai_epi32(_mm512_slli_epi32(w, 16), 16);
}
inline __m512i HighHalves(__m512i w) {
  return _mm512_srai_epi32(w, 16);
}
// 32 int8 at p as int16 (lane r: the pair of row r).
inline __m512i Pairs16(const uint8_t* p) {
  return _mm512_cvtepi8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}

// (a & 0x0f-style mask already applied) | (b & mask): vpternlogd with imm A | (B & C).
inline __m512i OrMasked(__m512i a, __m512i b, __m512i mask) {
  return _mm512_ternarylogic_epi32(a, b, mask, 0xf8);
}

// Each byte of x through a GF(2) affine transform (vgf2p8affineqb, GFNI): output bit i is the
// parity of the byte AND byte 7 - i of the 64-bit matrix, so a matrix whose byte 7 - i holds
// the single bit j moves bit j to bit i, and bits whose matrix byte is 0 come out 0 (no mask
// needed). Inline assembly because the file is built without -mgfni (AVX-512 CPUs without GFNI
// exist: Skylake-X, Cascade Lake); callers run it only where GetCpuFeatures().gfni.
template <uint64_t kMatrix>
PAGELLM_KERNEL_INLINE __m512i Gf2Affine(__m512i x) {
  const __m512i matrix = _mm512_set1_epi64(static_cast<int64_t>(kMatrix));
  __m512i r;
  asm("vgf2p8affineqb $0, %2, %1, %0" : "=v"(r) : "v"(x), "v"(matrix));
  return r;
}
// Bit `from` of each byte to bit 4, the others 0.
template <int kFrom>
PAGELLM_KERNEL_INLINE __m512i BitToBit4(__m512i x) {
  return Gf2Affine<uint64_t{1} << (24 + kFrom)>(x);
}

// table[x & 63] for each byte of x (vpermb, AVX512-VBMI). Inline assembly for the reason above;
// callers run it only where GetCpuFeatures().avx512_vbmi.
PAGELLM_KERNEL_INLINE __m512i PermuteBytes(__m512i table, __m512i x) {
  __m512i r;
  asm("vpermb %1, %2, %0" : "=v"(r) : "v"(table), "v"(x));
  return r;
}

// Byte-instruction extensions that unpack codes with fewer operations, where the CPU has them:
// Q5_K's fifth bits by GFNI, IQ4_XS's table lookups by VBMI. kBase runs everywhere.
enum class CodeIsa { kBase, kGfni, kVbmi };

// Low nibble of a | bit 4 of b (b's other bits 0): vpternlogd selecting a where the mask has
// 0x0f, else b.
inline __m512i NibbleAndBit4(__m512i a, __m512i b, __m512i m0f) {
  return _mm512_ternarylogic_epi32(a, b, m0f, 0xe4);
}

// Q5_K register k of a unit with GFNI: 5 operations for the pair instead of 7 (6 for k = 0).
template <int k>
PAGELLM_KERNEL_INLINE void Q5kCodesGfni(__m512i n, __m512i extra, __m512i m0f, __m512i* lo,
                                        __m512i* hi) {
  *lo = NibbleAndBit4(n, BitToBit4<k>(extra), m0f);
  *hi = NibbleAndBit4(_mm512_srli_epi16(n, 4), BitToBit4<4 + k>(extra), m0f);
}

// IQ4_XS's table: the code's value + 128 (unsigned), in each 128-bit lane.
inline __m512i Iq4xsTable() {
  return _mm512_broadcast_i32x4(
      _mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, static_cast<char>(129), static_cast<char>(141),
                    static_cast<char>(153), static_cast<char>(166), static_cast<char>(181),
                    static_cast<char>(197), static_cast<char>(217), static_cast<char>(241)));
}

// The 8 unsigned code registers of unit j (lo[k]: elements 32j + 4k.., hi[k]: 32j + 16 + 4k..;
// Q4_K's hi[k] hold 16 x the codes). kIsa: see CodeIsa.
template <DType kType, CodeIsa kIsa = CodeIsa::kBase>
PAGELLM_KERNEL_INLINE void UnitCodes(const uint8_t* sb, int j, __m512i (&lo)[4], __m512i (&hi)[4]) {
  constexpr KQuantPackedLayout kL = KQuantSuperBlockLayout(kType);
  const uint8_t* nib = sb + kL.nib_offset;
  const __m512i m0f = _mm512_set1_epi8(0x0f);
  [[maybe_unused]] __m512i extra;
  if constexpr (kType == DType::kQ5_K) {
    extra = Load512(sb + kL.extra_offset + 64 * j);
  }
  if constexpr (kType == DType::kQ6_K) {
    // nib byte = lo code | bits 4-5 of the hi code << 6; lo4 byte = the low 4 bits of the hi
    // codes of k = 2p (low nibble) and 2p + 1 (high nibble).
    const __m512i m3f = _mm512_set1_epi8(0x3f), m30 = _mm512_set1_epi8(0x30);
#pragma GCC unroll 2
    for (int p = 0; p < 2; ++p) {
      const __m512i l4 = Load512(sb + kL.extra_offset + 64 * (2 * j + p));
      const __m512i h4[2] = {_mm512_and_si512(l4, m0f),
                             _mm512_and_si512(_mm512_srli_epi16(l4, 4), m0f)};
#pragma GCC unroll 2
      for (int i = 0; i < 2; ++i) {
        const int k = 2 * p + i;
        const __m512i n = Load512(nib + 64 * (4 * j + k));
        lo[k] = _mm512_and_si512(n, m3f);
        // Bits 6-7 -> 4-5 (a 16-bit shift: the bits it carries in from the next byte are
        // masked off).
        hi[k] = OrMasked(h4[i], _mm512_srli_epi16(n, 2), m30);
      }
    }
    return;
  }
  if constexpr (kType == DType::kQ5_K && kIsa == CodeIsa::kGfni) {
    const uint8_t* u = nib + 64 * 4 * j;
    Q5kCodesGfni<0>(Load512(u), extra, m0f, &lo[0], &hi[0]);
    Q5kCodesGfni<1>(Load512(u + 64), extra, m0f, &lo[1], &hi[1]);
    Q5kCodesGfni<2>(Load512(u + 128), extra, m0f, &lo[2], &hi[2]);
    Q5kCodesGfni<3>(Load512(u + 192), extra, m0f, &lo[3], &hi[3]);
    return;
  }
  if constexpr (kType == DType::kIQ4_XS && kIsa == CodeIsa::kVbmi) {
    // The table repeats every 16 bytes, so index bits 4-5 (the high nibble in lo, the next
    // byte's low bits in hi after the 16-bit shift) do not change the entry, and vpermb
    // ignores bits 6-7.
    const __m512i table = Iq4xsTable();
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i n = Load512(nib + 64 * (4 * j + k));
      lo[k] = PermuteBytes(table, n);
      hi[k] = PermuteBytes(table, _mm512_srli_epi16(n, 4));
    }
    return;
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    __m512i n = Load512(nib + 64 * (4 * j + k));
    lo[k] = _mm512_and_si512(n, m0f);
    if constexpr (kType == DType::kQ4_K) {
      // 16 x the high codes, no shift: UnitDot shifts their chain's sum instead (one shift
      // per unit and token, not one per code register).
      asm("" : "+v"(n));  // one load: GCC would otherwise fold it into both ANDs
      hi[k] = _mm512_and_si512(n, _mm512_set1_epi8(static_cast<char>(0xf0)));
      continue;
    }
    hi[k] = _mm512_and_si512(_mm512_srli_epi16(n, 4), m0f);
    if constexpr (kType == DType::kQ5_K) {
      // Bit k -> bit 4 (lo), bit 4 + k -> bit 4 (hi); 16-bit shifts carry nothing into bit 4.
      const __m512i m10 = _mm512_set1_epi8(0x10);
      lo[k] = OrMasked(lo[k], _mm512_slli_epi16(extra, 4 - k), m10);
      hi[k] = OrMasked(hi[k], k == 0 ? extra : _mm512_srli_epi16(extra, k), m10);
    } else if constexpr (kType == DType::kIQ4_XS) {
      // Looked up per 128-bit lane (vpshufb: the masked nibble indexes the lane's 16 bytes).
      const __m512i lut = Iq4xsTable();
      lo[k] = _mm512_shuffle_epi8(lut, lo[k]);
      hi[k] = _mm512_shuffle_epi8(lut, hi[k]);
    }
  }
}

// Pairs (bsum32_{2p}, bsum32_{2p+1}) of one token's super-block as int32 words p = 0..3.
inline void Bsum32Pairs(const uint8_t* bsum, int32_t (&pairs)[4]) {
  const __m256i b = _mm256_load_si256(reinterpret_cast<const __m256i*>(bsum));
  const __m256i s32 = _mm256_madd_epi16(b, _mm256_set1_epi16(1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(pairs), _mm256_cvtepi32_epi16(s32));
}

// The sub-block scales of unit j's halves (Q6_K: 16-element sub-blocks 2j, 2j + 1) or, twice,
// of the unit, in the lanes.
template <DType kType, bool kMulld>
PAGELLM_KERNEL_INLINE void UnitScales(const uint8_t* sb, const KQuantPackedLayout& pl, int j,
                                      __m512i* sc_lo, __m512i* sc_hi) {
  if constexpr (kType == DType::kQ6_K && kMulld) {
    const __m512i w = Pairs16(sb + pl.sc_offset + 32 * j);
    *sc_lo = LowHalves(w);
    *sc_hi = HighHalves(w);
  } else if constexpr (kType == DType::kQ6_K) {
    // The pair (sc_2j, sc_2j+1) as the two int16 of each lane: UnitDot's vpdpwssd operand.
    *sc_lo = Pairs16(sb + pl.sc_offset + 32 * j);
    *sc_hi = *sc_lo;
  } else {
    const __m512i w = Pairs16(sb + pl.sc_offset + 32 * (j / 2));
    *sc_lo = j % 2 == 0 ? LowHalves(w) : HighHalves(w);
    *sc_hi = *sc_lo;
    if constexpr (kType == DType::kIQ4_XS && !kMulld) {
      // (sc, 256 * sc) as the two int16 of each lane (sc in [-32, 31]): UnitDot's operand.
      *sc_hi = _mm512_ternarylogic_epi32(_mm512_set1_epi32(0xffff), *sc_lo,
                                         _mm512_slli_epi32(*sc_lo, 24), 0xca);
    }
  }
}

// isum and isum_hi (two accumulators, so that the vpdpwssd chains through the units stay apart)
// + one token's unit j (x: its 32 activations) times the sub-block scales: with kMulld, as
// 16-element chains times vpmulld, else by vpdpwssd where the partial sums fit int16 (see the
// top of the file for which path runs where).
template <DType kType, bool kMulld>
PAGELLM_KERNEL_INLINE void UnitDot(__m512i& isum, __m512i& isum_hi, const __m512i (&lo)[4],
                                   const __m512i (&hi)[4], __m512i sc_lo, __m512i sc_hi,
                                   const uint8_t* x) {
  if constexpr (kType == DType::kQ6_K && !kMulld) {
    // A 4-element sum fits int16 (|sum| <= 4 * 63 * 128 = 32256): the lo and hi halves' sums
    // of register k go into one lane's two int16 and meet the scales of the two sub-blocks,
    // (sc_2j, sc_2j+1) in sc_lo, in one vpdpwssd.
    const __m512i low_words = _mm512_set1_epi32(0xffff);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i cl = DpbusdBroadcast(_mm512_setzero_si512(), lo[k], x + 4 * k);
      const __m512i ch = DpbusdBroadcast(_mm512_setzero_si512(), hi[k], x + 16 + 4 * k);
      // low_words ? cl : ch << 16, bit by bit.
      const __m512i both =
          _mm512_ternarylogic_epi32(low_words, cl, _mm512_slli_epi32(ch, 16), 0xca);
      if (k % 2 == 0) {
        isum = _mm512_dpwssd_epi32(isum, both, sc_lo);
      } else {
        isum_hi = _mm512_dpwssd_epi32(isum_hi, both, sc_lo);
      }
    }
    return;
  }
  if constexpr (kType == DType::kQ5_K && !kMulld) {
    // An 8-element sum fits int16 (|sum| <= 8 * 31 * 128 = 31744) and sc_lo holds the scale
    // (0..63) in the low int16 of each lane and 0 in the high one, so each pair of registers'
    // sum takes one vpdpwssd (its low-word product is the exact sum * sc) instead of 16-element
    // chains times vpmulld.
#pragma GCC unroll 2
    for (int k = 0; k < 4; k += 2) {
      const __m512i cl = DpbusdBroadcast(DpbusdBroadcast(_mm512_setzero_si512(), lo[k], x + 4 * k),
                                         lo[k + 1], x + 4 * k + 4);
      const __m512i ch =
          DpbusdBroadcast(DpbusdBroadcast(_mm512_setzero_si512(), hi[k], x + 16 + 4 * k), hi[k + 1],
                          x + 20 + 4 * k);
      isum = _mm512_dpwssd_epi32(isum, cl, sc_lo);
      isum_hi = _mm512_dpwssd_epi32(isum_hi, ch, sc_lo);
    }
    return;
  }
  __m512i cl = _mm512_setzero_si512(), ch = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    cl = DpbusdBroadcast(cl, lo[k], x + 4 * k);
    ch = DpbusdBroadcast(ch, hi[k], x + 16 + 4 * k);
  }
  if constexpr (kType == DType::kQ4_K) {
    static_assert(!kMulld);
    // Each half's sum fits int16 (|cl|, |ch / 16| <= 16 * 15 * 128 = 30720), and sc_lo holds
    // the scale (0..63) in the low int16 of each lane and 0 in the high one, so vpdpwssd's
    // low-word product is the exact cl * sc (the high word, cl's sign, meets the 0). That is
    // one multiply-add per half instead of add, vpmulld, add; two accumulators keep the
    // chains through the units apart. ch = 16 x the high half's sum: the shift is exact.
    isum = _mm512_dpwssd_epi32(isum, cl, sc_lo);
    isum_hi = _mm512_dpwssd_epi32(isum_hi, _mm512_srai_epi32(ch, 4), sc_lo);
  } else if constexpr (kType == DType::kIQ4_XS && !kMulld) {
    // IQ4_XS: the unit's sum c (|c| <= 32 * 241 * 128 < 2^20) does not fit int16, but its low
    // byte and c >> 8 do: the lane (c & 0xff, c >> 8) against (sc, 256 * sc) is one vpdpwssd,
    // sc * (c & 0xff) + 256 * sc * (c >> 8) = sc * c, instead of vpmulld and an add.
    // Bytes (b0, b1, b2, b3) of c -> (b0, 0, b1, b2): c fits 24 bits, so b1, b2 are c >> 8.
    const __m512i split_bytes = _mm512_broadcast_i32x4(
        _mm_setr_epi8(0, -128, 1, 2, 4, -128, 5, 6, 8, -128, 9, 10, 12, -128, 13, 14));
    const __m512i split = _mm512_shuffle_epi8(_mm512_add_epi32(cl, ch), split_bytes);
    isum = _mm512_dpwssd_epi32(isum, split, sc_hi);
  } else if constexpr (kType == DType::kQ6_K) {
    isum = _mm512_add_epi32(
        isum, _mm512_add_epi32(_mm512_mullo_epi32(cl, sc_lo), _mm512_mullo_epi32(ch, sc_hi)));
  } else {
    isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(_mm512_add_epi32(cl, ch), sc_lo));
  }
}

// One token's super-block s after the units: the offsets' and mins' terms, then the fp32 step
// into acc (at: the token's activations; d, m: the rows' super-block factors).
template <DType kType>
PAGELLM_KERNEL_INLINE __m512 SuperBlockStep(__m512 acc, __m512i s1, const uint8_t* sb,
                                            const KQuantPackedLayout& pl, const uint8_t* at,
                                            const Q8KActsLayout& al, int64_t s, __m512 d,
                                            __m512 m) {
  constexpr bool kMin = kType == DType::kQ4_K || kType == DType::kQ5_K;
  const uint8_t* bsum = at + al.bsum_offset + 32 * s;
  [[maybe_unused]] __m512i s2;
  if constexpr (kType == DType::kQ6_K) {
    // -32 * sum_j sc_j * bsum_j over the 16 sub-blocks of 16.
    __m512i b = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      b = DpwssdBroadcast(b, Pairs16(sb + pl.sc_offset + 32 * p), bsum + 4 * p);
    }
    s1 = _mm512_sub_epi32(s1, _mm512_slli_epi32(b, 5));
  } else {
    alignas(16) int32_t pairs[4];
    Bsum32Pairs(bsum, pairs);
    const uint8_t* pp = reinterpret_cast<const uint8_t*>(pairs);
    __m512i b = _mm512_setzero_si512();
    const int64_t off = kMin ? pl.mn_offset : pl.sc_offset;
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) b = DpwssdBroadcast(b, Pairs16(sb + off + 32 * p), pp + 4 * p);
    if constexpr (kMin) {
      s2 = b;
    } else {
      s1 = _mm512_sub_epi32(s1, _mm512_slli_epi32(b, 7));  // IQ4_XS: -128 * sum sc * bsum32
    }
  }
  float dx;
  std::memcpy(&dx, at + al.d_offset + 4 * s, 4);
  const __m512 vdx = _mm512_set1_ps(dx);
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), _mm512_mul_ps(d, vdx), acc);
  if constexpr (kMin) acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s2), _mm512_mul_ps(m, vdx), acc);
  return acc;
}

template <DType kType>
PAGELLM_KERNEL_INLINE void LoadFactors(const uint8_t* sb, const KQuantPackedLayout& pl, __m512* d,
                                       __m512* m) {
  *d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb + pl.d_offset)));
  *m = _mm512_setzero_ps();
  if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
    *m = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb + pl.m_offset)));
  }
}

// T tokens over one packed 16-row group, unpacking each unit once for all of them.
template <DType kType, int T, PrefetchTarget kPrefetch, CodeIsa kIsa>
void GroupTokens(const uint8_t* group, const KQuantPackedLayout& pl, const Q8KActsLayout& al,
                 const uint8_t* act, int valid, float* y, int64_t ys, const uint8_t* stop) {
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  // The super-block's cache lines kPrefetchBytes ahead, a share before each of its 8 units:
  // one burst of all 35-53 lines per super-block filled the miss queues and stalled on them
  // (perf: 11% of Q4_K_M decode on the instruction after the burst, Zen 4). The line counts
  // are compile-time and the address is clamped to the task's last super-block instead of
  // tested, so each line costs one prefetch instruction: a loop per unit with a runtime L1/L2
  // test per line doubled the instructions of a super-block and cost a third of the
  // L2-resident rate (Q4_K 512x2048, 1 thread, Zen 5: 67 -> 94 GB/s without the prefetches).
  constexpr int kLines = static_cast<int>(KQuantSuperBlockLayout(kType).sb_bytes / 64);
  constexpr int kLinesPerUnit = (kLines + 7) / 8;
  // One-token tiles of all but Q4_K take vpmulld (the top of the file says why).
  constexpr bool kMulld = kType != DType::kQ4_K && T == 1;
  for (int64_t s = 0; s < pl.nsb; ++s) {
    const uint8_t* sb = group + s * pl.sb_bytes;
    // sb + kPrefetchBytes, or the task's last super-block once that is nearer.
    const uint8_t* ahead = PrefetchAddress<64 * kLines>(sb, kPrefetchBytes, stop);
    __m512i isum[T], isum_hi[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) isum[t] = isum_hi[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      if constexpr (kPrefetch != PrefetchTarget::kNone) {
#pragma GCC unroll 8
        for (int i = 0; i < kLinesPerUnit; ++i) {
          const int line = j * kLinesPerUnit + i;
          if (line < kLines) PrefetchLine<kPrefetch>(ahead + 64 * line);
        }
      }
      __m512i lo[4], hi[4], sc_lo, sc_hi;
      UnitCodes<kType, kIsa>(sb, j, lo, hi);
      UnitScales<kType, kMulld>(sb, pl, j, &sc_lo, &sc_hi);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        UnitDot<kType, kMulld>(isum[t], isum_hi[t], lo, hi, sc_lo, sc_hi,
                               act + t * al.bytes + 256 * s + 32 * j);
      }
    }
    __m512 d, m;
    LoadFactors<kType>(sb, pl, &d, &m);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      isum[t] = _mm512_add_epi32(isum[t], isum_hi[t]);
      acc[t] = SuperBlockStep<kType>(acc[t], isum[t], sb, pl, act + t * al.bytes, al, s, d, m);
    }
  }
  const __mmask16 mask = TailMask16(valid);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ys, mask, acc[t]);
}

// Where the CPU has the extension, unless its environment variable is 0 (A/B runs).
bool Allowed(bool cpu_has, const char* env_name) {
  const char* e = std::getenv(env_name);
  return cpu_has && (e == nullptr || e[0] != '0');
}
bool GfniAllowed() {
  return Allowed(GetCpuFeatures().gfni, "PAGELLM_GFNI");
}
bool VbmiAllowed() {
  return Allowed(GetCpuFeatures().avx512_vbmi, "PAGELLM_VBMI");
}
std::atomic<bool> gfni_enabled{GfniAllowed()};
std::atomic<bool> vbmi_enabled{VbmiAllowed()};

// The extension that unpacks kType's codes with fewer operations (kBase: none does).
constexpr CodeIsa ByteIsaOf(DType type) {
  return type == DType::kQ5_K     ? CodeIsa::kGfni
         : type == DType::kIQ4_XS ? CodeIsa::kVbmi
                                  : CodeIsa::kBase;
}

bool ByteIsaEnabled(CodeIsa isa) {
  switch (isa) {
    case CodeIsa::kGfni:
      return gfni_enabled.load(std::memory_order_relaxed);
    case CodeIsa::kVbmi:
      return vbmi_enabled.load(std::memory_order_relaxed);
    case CodeIsa::kBase:
      break;
  }
  return false;
}

}  // namespace

void SetKQuantByteIsaForTesting(bool enabled) {
  gfni_enabled.store(enabled && GfniAllowed(), std::memory_order_relaxed);
  vbmi_enabled.store(enabled && VbmiAllowed(), std::memory_order_relaxed);
}

template <DType kType>
void MatMulKQuantBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const WeightMatrix& w = *a.w;
  if (w.packed == nullptr) {
    MatMulDecodeBlock<kType>(a, r0, r1, t0, t1);
    return;
  }
  CHECK_EQ(r0 % 16, 0) << "packed row ranges start on a group";
  const KQuantPackedLayout pl = GetKQuantPackedLayout(kType, w.rows, w.cols);
  const Q8KActsLayout al = GetQ8KActsLayout(w.cols);
  // End of the last group this thread streams next: no prefetches past it (another thread's).
  const int64_t prefetch_rows = std::min(w.rows, std::max(r1, a.prefetch_row_end));
  const uint8_t* stop = w.packed + (prefetch_rows + 15) / 16 * pl.group_bytes;
  for (int64_t r = r0; r < r1; r += 16) {
    const uint8_t* group = w.packed + (r / 16) * pl.group_bytes;
    const int valid = static_cast<int>(std::min<int64_t>(16, r1 - r));
    for (int64_t t = t0; t < t1; t += kTile) {
      WithTileSize<kTile>(std::min<int64_t>(kTile, t1 - t), [&](auto tile) {
        constexpr int kT = decltype(tile)::value;
        const uint8_t* x = a.qx + t * al.bytes;
        float* y = a.y + t * w.rows + r;
        WithPrefetchTarget(kPrefetchBytes, kPrefetchToL2, [&](auto target) {
          constexpr PrefetchTarget kTarget = decltype(target)::value;
          // Two variants per type at most (one where kIsa is kBase).
          constexpr CodeIsa kIsa = ByteIsaOf(kType);
          if (ByteIsaEnabled(kIsa)) {
            GroupTokens<kType, kT, kTarget, kIsa>(group, pl, al, x, valid, y, w.rows, stop);
          } else {
            GroupTokens<kType, kT, kTarget, CodeIsa::kBase>(group, pl, al, x, valid, y, w.rows,
                                                            stop);
          }
        });
      });
    }
  }
}

#define PAGELLM_KQUANT_KERNEL(T) \
  template void MatMulKQuantBlock<T>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
PAGELLM_KQUANT_KERNEL(DType::kQ4_K)
PAGELLM_KQUANT_KERNEL(DType::kQ5_K)
PAGELLM_KQUANT_KERNEL(DType::kQ6_K)
PAGELLM_KQUANT_KERNEL(DType::kIQ4_XS)
#undef PAGELLM_KQUANT_KERNEL

}  // namespace pagellm::kernels_internal::avx512
