// Block layouts of the GGUF-only weight types (ggml's definitions; geometry rows in
// include/pagellm/dtype.h), and their scalar decoders into the integer form the decoding MatMul
// kernels multiply (matmul_decode_internal.h).
//
// Every fp16 field is stored as raw bits. Multi-byte fields are little-endian and unaligned
// (blocks are packed back to back), so readers memcpy them.
#pragma once

#include <cstdint>
#include <cstring>

#include "base/half.h"
#include "pagellm/dtype.h"

namespace pagellm {

// ---- 32-element blocks ------------------------------------------------------------------------

struct BlockQ4_1 {
  uint16_t d, m;   // fp16 scale and min
  uint8_t qs[16];  // element i (i < 16) low nibble of qs[i], element i + 16 high nibble
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockQ5_0 {
  uint16_t d;      // fp16 scale
  uint8_t qh[4];   // bit i of the little-endian u32: fifth bit of element i
  uint8_t qs[16];  // low 4 bits as in Q4_0
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24);

struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];  // nibbles (as Q4_0) indexing kIq4NlValues
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// The 16 non-uniform levels of IQ4_NL / IQ4_XS.
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// ---- 256-element super-blocks ------------------------------------------------------------------

// 16 sub-blocks of 16: x = d * (scales[j] & 15) * q - dmin * (scales[j] >> 4), q 2-bit. Element
// 128h + 32k + l (h < 2, k < 4, l < 32) is bits 2k..2k+1 of qs[32h + l].
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// 16 sub-blocks of 16: x = d * (s_j - 32) * (q - 4 * !hbit), q as Q2_K's, s_j 6-bit (see
// Q3KScale), hbit of element 128h + 32k + l is bit 4h + k of hmask[l].
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// 8 sub-blocks of 32: x = d * sc_j * q - dmin * m_j (sc, m 6-bit, KScaleMin). Element 64c + l
// (l < 32) is the low nibble of qs[32c + l], element 64c + 32 + l the high one.
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

// As Q4_K with a fifth bit: element 64c + l takes bit 2c of qh[l], 64c + 32 + l bit 2c + 1.
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q 6-bit. In half h (elements 128h..), for
// l < 32: element 32k + l has low bits from ql[64h + l + 32 (k & 1)] (low nibble for k < 2, high
// for k >= 2) and high bits 2k..2k+1 of qh[32h + l].
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// 8 sub-blocks of 32: x = d * (ls_j - 32) * kIq4NlValues[q], ls_j = 4 bits of scales_l[j / 2]
// (low nibble for even j) | 2 bits (2j) of scales_h << 4; sub-block j's 16 bytes qs[16j..] as
// IQ4_NL.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// Scale and min j (< 8) of Q4_K / Q5_K's 12 scale bytes: 6 bits each; j < 4 in the low 6 bits
// of bytes j / j + 4, j >= 4 split between a nibble of byte j + 4 and the top 2 bits of bytes
// j - 4 / j.
inline void KScaleMin(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Scale j (< 16) of Q3_K, 0..63 (the format subtracts 32): low 4 bits are a nibble of byte
// j % 8 (low for j < 8), high 2 bits are bits 2 (j / 4) of byte 8 + j % 4.
inline int Q3KScale(const uint8_t* s, int j) {
  const int lo = j < 8 ? (s[j] & 15) : (s[j - 8] >> 4);
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return lo | (hi << 4);
}

template <typename Block>
inline Block LoadBlock(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof(b));
  return b;
}

}  // namespace pagellm
