// The load-time packed copy of K-quant / IQ4_XS matrices (Q4_K, Q5_K, Q6_K, IQ4_XS) that the
// AVX-512 VNNI kernels (matmul_kquant_avx512.cc) stream: 16 rows in the int32 lanes of a
// register, like Q4_0's QuantPackedLayout, so a token's dot products of 16 rows take vertical
// vpdpbusd chains and no horizontal sums. Codes keep their bit width (bytes per weight stay
// within 1-3% of the file's); scales and mins are decoded once, here, into int8 and fp16
// (kept at the file's 6 bits instead, the extra unpacking measured slower than the 2.7% of
// Q4_K bytes it saved: docs/BENCHMARKS.md, 2026-12-04 16:05).
//
// Groups of 16 rows, group g at packed + g * group_bytes, each nsb = cols / 256 super-blocks of
// sb_bytes (a multiple of 64), super-block s at s * sb_bytes. A super-block's scales come
// first, since the kernel reads them first, and its code planes after them, so a thread's
// stream only moves forward (Q5_K / Q6_K read their second plane alongside nib, unit by unit).
// With the scales after the codes, the first read of every super-block was its far end: a
// Qwen2.5-1.5B Q4_K_M decode profile put a fifth of the Q4_K kernel's samples on those loads.
//   sc   int8 [pairs][16 rows][2] at 0: the sub-block scales of each row, two sub-blocks per
//        dword (Q6_K: 8 pairs of 16-element sub-blocks; the others: 4 pairs of 32-element ones)
//   mn   int8 [4][16][2] (Q4_K, Q5_K): the sub-block mins, as sc
//   d    fp16 [16]: the super-block scale of each row
//   m    fp16 [16] (Q4_K, Q5_K): -dmin of each row
//   zero padding to a multiple of 64 bytes (the header)
//   nib  [8 units][4 k][16 rows][4 bytes]  (2048 bytes) unit j = elements 32j..32j+31; the
//        dword of row r in register (j, k) holds, byte b: low nibble = the low 4 bits of the
//        unsigned code of element 32j + 4k + b, high nibble = those of element 32j + 16 + 4k + b
//        (Q6_K: bits 0-5 = the whole code of element 32j + 4k + b, bits 6-7 = bits 4-5 of
//        element 32j + 16 + 4k + b's code)
//   Q5_K: hb5 [8 units][16][4] (512): bit k of byte b = bit 4 of element 32j + 4k + b's code,
//        bit 4 + k = bit 4 of element 32j + 16 + 4k + b's code
//   Q6_K: lo4 [8 units][2 k pairs p][16][4] (1024): low nibble = the low 4 bits of element
//        32j + 16 + 8p + b's code, high nibble = those of element 32j + 16 + 8p + 4 + b's
//        (the high halves' codes not in nib), so a unit's 8 code registers take 18 operations
// The unsigned code u is the reference decoder's code q (matmul_decode_internal.h) plus an
// offset: 0 (Q4_K, Q5_K), 32 (Q6_K), or, for IQ4_XS, u is the table index and the kernel
// looks up q + 128. Rows past the matrix end are zero (their lanes compute zeros that are
// never stored).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/weight_matrix.h"
#include "pagellm/dtype.h"

namespace pagellm {

struct KQuantPackedLayout {
  static constexpr int64_t kNibBytes = 2048;
  int64_t extra_bytes = 0;  // hb5 or lo4 plane after nib
  int64_t sc_offset = 0;    // from the super-block's start
  int64_t sc_pairs = 0;     // 8 (Q6_K) or 4
  int64_t mn_offset = 0;    // 0: no mins
  int64_t d_offset = 0;
  int64_t m_offset = 0;      // 0: no mins
  int64_t nib_offset = 0;    // the header's bytes
  int64_t extra_offset = 0;  // nib_offset + kNibBytes
  int64_t sb_bytes = 0;
  int64_t nsb = 0;
  int64_t group_bytes = 0;
  int64_t groups = 0;
};

// True for the types with a KQuantPackedLayout.
constexpr bool HasKQuantPackedLayout(DType t) {
  return t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K || t == DType::kIQ4_XS;
}

// The offsets within one super-block of type t (nsb, group_bytes and groups left 0).
constexpr KQuantPackedLayout KQuantSuperBlockLayout(DType t) {
  KQuantPackedLayout l;
  l.extra_bytes = t == DType::kQ5_K ? 512 : t == DType::kQ6_K ? 1024 : 0;
  l.sc_offset = 0;
  l.sc_pairs = t == DType::kQ6_K ? 8 : 4;
  int64_t end = l.sc_offset + 32 * l.sc_pairs;
  const bool has_min = t == DType::kQ4_K || t == DType::kQ5_K;
  if (has_min) {
    l.mn_offset = end;
    end += 128;
  }
  l.d_offset = end;
  end += 32;
  if (has_min) {
    l.m_offset = end;
    end += 32;
  }
  l.nib_offset = (end + 63) / 64 * 64;
  l.extra_offset = l.nib_offset + KQuantPackedLayout::kNibBytes;
  l.sb_bytes = l.extra_offset + l.extra_bytes;
  return l;
}

inline KQuantPackedLayout GetKQuantPackedLayout(DType t, int64_t rows, int64_t cols) {
  KQuantPackedLayout l = KQuantSuperBlockLayout(t);
  l.nsb = cols / 256;
  l.group_bytes = l.nsb * l.sb_bytes;
  l.groups = (rows + 15) / 16;
  return l;
}

// Bytes of the packed copy of a rows x cols matrix of type t.
int64_t KQuantPackedBytes(DType t, int64_t rows, int64_t cols);

// Writes w's packed copy to out; pool (may be null) packs groups in parallel.
void PackKQuantWeights(const WeightMatrix& w, uint8_t* out, ThreadPool* pool = nullptr);

}  // namespace pagellm
