// Small AVX-512 helpers shared by the *_avx512.cc kernels. Include only from translation units
// compiled with the AVX-512 flags (CMake gives them to files named *_avx512.cc).
#pragma once

// GCC 12 reports -W(maybe-)uninitialized inside the intrinsic headers for intrinsics built on
// _mm*_undefined_*() (GCC bug 105593). The pragma must precede the header's first inclusion,
// so this header is included before <immintrin.h> by every SIMD kernel file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace pagellm::kernels_internal::avx512 {

// Sum of the 16 lanes in a fixed tree: (l + l+8), then (+4), (+2), (+1). Every kernel that
// reduces an accumulator uses exactly this order (the scalar level emulates it).
static inline float HSum(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}

// For helpers that only issue software prefetches. GCC 12 sees a call to a function whose body
// is nothing but __builtin_prefetch as free of side effects and deletes it during early
// inlining when it does not inline it: the Q8_0 / Q4_0 / Q4_Z kernels' PrefetchRange /
// PrefetchAhead / PrefetchQuad calls were compiled to nothing (objdump: no prefetch in their
// translation units) until these helpers were forced inline.
#define PAGELLM_PREFETCH_HELPER __attribute__((always_inline)) inline

// For the inner helpers of the decode kernels (one block or unit of codes): GCC's inliner
// stops inlining them once a translation unit holds enough instantiations of the kernels (token
// tiles x prefetch targets), and an out-of-line call per block, its accumulators passed through
// memory, halved the Q4_0 decode kernel's L2-resident rate (perf: AccumulateQ4Block<1> 84%).
#define PAGELLM_KERNEL_INLINE __attribute__((always_inline)) inline

// Software prefetch of one cache line of a weight stream: into L1 and L2 (T0), or into L2 only
// (T1) when to_l2 (a kernel-table entry, kernels/kernel_tuning.h: quant_prefetch_l2).
PAGELLM_PREFETCH_HELPER static void PrefetchWeightLine(const void* p, bool to_l2) {
  if (to_l2) {
    _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
  } else {
    _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
  }
}

// Where a decode kernel's software prefetches put the weight lines: none, L1 and L2 (T0), or
// L2 only (T1). Chosen once per kernel call from the kernel table (kernel_tuning.h) and passed
// down as a template argument, so the hot loop holds one prefetch instruction per line and no
// test (a runtime L1/L2 test per line cost the Q4_K and Q4_0 decode loops a quarter to a third
// of their L2-resident rate, Zen 5).
enum class PrefetchTarget { kNone, kL1, kL2 };

template <PrefetchTarget kTarget>
PAGELLM_PREFETCH_HELPER static void PrefetchLine(const void* p) {
  if constexpr (kTarget == PrefetchTarget::kL2) {
    _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
  } else if constexpr (kTarget == PrefetchTarget::kL1) {
    _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
  }
}

// The start of the kBytes block to prefetch for the block at p: p + distance, or the task's last
// block (stop - kBytes; stop: the end of the task's rows) once that is nearer. Beyond stop are
// rows that another task streams, maybe on the other core, and a short task would spend its
// prefetches there instead of on its own rows. Clamped rather than tested: no branch.
template <int64_t kBytes>
static inline const uint8_t* PrefetchAddress(const uint8_t* p, int64_t distance,
                                             const uint8_t* stop) {
  return p + std::min<int64_t>(distance, stop - kBytes - p);
}

// Prefetches the lines of the kBytes block at PrefetchAddress (nothing for kNone).
template <int64_t kBytes, PrefetchTarget kTarget>
PAGELLM_PREFETCH_HELPER static void PrefetchBlockAhead(const uint8_t* p, int64_t distance,
                                                       const uint8_t* stop) {
  if constexpr (kTarget != PrefetchTarget::kNone) {
    const uint8_t* ahead = PrefetchAddress<kBytes>(p, distance, stop);
#pragma GCC unroll 32
    for (int64_t i = 0; i < (kBytes + 63) / 64; ++i) PrefetchLine<kTarget>(ahead + 64 * i);
  }
}

// f(std::integral_constant<PrefetchTarget, ...>{}) for a prefetch distance (0: none) and the
// kernel table's L2 choice.
template <typename F>
static inline void WithPrefetchTarget(int64_t distance, bool to_l2, F&& f) {
  if (distance == 0) {
    f(std::integral_constant<PrefetchTarget, PrefetchTarget::kNone>{});
  } else if (to_l2) {
    f(std::integral_constant<PrefetchTarget, PrefetchTarget::kL2>{});
  } else {
    f(std::integral_constant<PrefetchTarget, PrefetchTarget::kL1>{});
  }
}

static inline __mmask16 TailMask16(int64_t n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}

static inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// exp(x) for 16 lanes, ~2 ulp on normal results (degree-7 Taylor polynomial of e^r on
// |r| <= ln2/2, truncation error < 6e-9 relative). Overflows to +inf, underflows through
// denormals to 0, NaN propagates. Deterministic: a fixed sequence of IEEE operations.
static inline __m512 Exp(__m512 x) {
  // Keeps n = round(x * log2(e)) small while leaving over/underflow to vscalefps.
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_min_ps(_mm512_set1_ps(89.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n * ln2 in two steps (ln2_hi has 15 significant bits, so n * ln2_hi is exact).
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// s + dpbusd(u, broadcast(the int32 at p)) with the broadcast as the instruction's memory
// operand ({1to16}): GCC emits a separate vpbroadcastd for the intrinsic form, one more uop
// per dot product in the batch-1 Q4_0 loop. With the single code load in AccumulateQ4Block:
// the L2-resident Q4_0 GEMV (kernels_bench gemv/Q4_0/512x2048/t1/hot) 72-75 -> 79-81 GB/s.
static inline __m512i DpbusdBroadcast(__m512i s, __m512i u, const uint8_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(s) : "v"(u), "m"(*reinterpret_cast<const int32_t*>(p)));
  return s;
}

// s + dpwssd(a, broadcast(the int32 at p)), the same memory-operand form: per lane, the int16
// products of the two 16-bit halves, summed into the int32 lane.
static inline __m512i DpwssdBroadcast(__m512i s, __m512i a, const uint8_t* p) {
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(s) : "v"(a), "m"(*reinterpret_cast<const int32_t*>(p)));
  return s;
}

}  // namespace pagellm::kernels_internal::avx512
