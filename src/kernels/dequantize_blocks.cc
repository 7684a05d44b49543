// Reference dequantizers of the GGUF-only block types, written from ggml's format definitions
// (quant_blocks.h) with ggml's fp32 operation order, so that the values equal llama.cpp's bit
// for bit: the scale products (d * sc, dmin * m) first, then one multiply by the code and one
// add or subtract of the min term.
#include <cstring>

#include "kernels/quant_blocks.h"
#include "kernels/quantize.h"
#include "pagellm/check.h"

namespace pagellm {

void DequantizeRowQ4_1(const uint8_t* x, float* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b, y += 32) {
    const auto blk = LoadBlock<BlockQ4_1>(x + b * sizeof(BlockQ4_1));
    const float d = F16ToF32(blk.d), m = F16ToF32(blk.m);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(blk.qs[j] & 15) * d + m;
      y[j + 16] = static_cast<float>(blk.qs[j] >> 4) * d + m;
    }
  }
}

namespace {
// The five-bit codes of a Q5_0 / Q5_1 block.
void Q5Codes(const uint8_t* qh4, const uint8_t* qs, int* q) {
  uint32_t qh;
  std::memcpy(&qh, qh4, 4);
  for (int j = 0; j < 16; ++j) {
    q[j] = (qs[j] & 15) | static_cast<int>(((qh >> j) & 1) << 4);
    q[j + 16] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
  }
}
}  // namespace

void DequantizeRowQ5_0(const uint8_t* x, float* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b, y += 32) {
    const auto blk = LoadBlock<BlockQ5_0>(x + b * sizeof(BlockQ5_0));
    const float d = F16ToF32(blk.d);
    int q[32];
    Q5Codes(blk.qh, blk.qs, q);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q[j] - 16) * d;
  }
}

void DequantizeRowQ5_1(const uint8_t* x, float* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b, y += 32) {
    const auto blk = LoadBlock<BlockQ5_1>(x + b * sizeof(BlockQ5_1));
    const float d = F16ToF32(blk.d), m = F16ToF32(blk.m);
    int q[32];
    Q5Codes(blk.qh, blk.qs, q);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q[j]) * d + m;
  }
}

void DequantizeRowIQ4_NL(const uint8_t* x, float* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b, y += 32) {
    const auto blk = LoadBlock<BlockIQ4_NL>(x + b * sizeof(BlockIQ4_NL));
    const float d = F16ToF32(blk.d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kIq4NlValues[blk.qs[j] & 15]);
      y[j + 16] = d * static_cast<float>(kIq4NlValues[blk.qs[j] >> 4]);
    }
  }
}

void DequantizeRowQ2_K(const uint8_t* x, float* y, int64_t n) {
  CHECK_EQ(n % 256, 0);
  for (int64_t b = 0; b < n / 256; ++b, y += 256) {
    const auto blk = LoadBlock<BlockQ2_K>(x + b * sizeof(BlockQ2_K));
    const float d = F16ToF32(blk.d), dmin = F16ToF32(blk.dmin);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int q = (blk.qs[32 * h + l] >> (2 * k)) & 3;
      const int s = blk.scales[e / 16];
      const float dl = d * static_cast<float>(s & 15), ml = dmin * static_cast<float>(s >> 4);
      y[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

void DequantizeRowQ3_K(const uint8_t* x, float* y, int64_t n) {
  CHECK_EQ(n % 256, 0);
  for (int64_t b = 0; b < n / 256; ++b, y += 256) {
    const auto blk = LoadBlock<BlockQ3_K>(x + b * sizeof(BlockQ3_K));
    const float d = F16ToF32(blk.d);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int hbit = (blk.hmask[l] >> (4 * h + k)) & 1;
      const int q = ((blk.qs[32 * h + l] >> (2 * k)) & 3) - (hbit ? 0 : 4);
      const float dl = d * static_cast<float>(Q3KScale(blk.scales, e / 16) - 32);
      y[e] = dl * static_cast<float>(q);
    }
  }
}

void DequantizeRowQ4_K(const uint8_t* x, float* y, int64_t n) {
  CHECK_EQ(n % 256, 0);
  for (int64_t b = 0; b < n / 256; ++b, y += 256) {
    const auto blk = LoadBlock<BlockQ4_K>(x + b * sizeof(BlockQ4_K));
    const float d = F16ToF32(blk.d), dmin = F16ToF32(blk.dmin);
    for (int e = 0; e < 256; ++e) {
      const int c = e / 64, l = e % 32, hi = (e % 64) / 32;
      const int q = (blk.qs[32 * c + l] >> (4 * hi)) & 15;
      int sc, m;
      KScaleMin(blk.scales, e / 32, &sc, &m);
      y[e] = d * static_cast<float>(sc) * static_cast<float>(q) - dmin * static_cast<float>(m);
    }
  }
}

void DequantizeRowQ5_K(const uint8_t* x, float* y, int64_t n) {
  CHECK_EQ(n % 256, 0);
  for (int64_t b = 0; b < n / 256; ++b, y += 256) {
    const auto blk = LoadBlock<BlockQ5_K>(x + b * sizeof(BlockQ5_K));
    const float d = F16ToF32(blk.d), dmin = F16ToF32(blk.dmin);
    for (int e = 0; e < 256; ++e) {
      const int c = e / 64, l = e % 32, hi = (e % 64) / 32;
      const int q =
          ((blk.qs[32 * c + l] >> (4 * hi)) & 15) | (((blk.qh[l] >> (2 * c + hi)) & 1) << 4);
      int sc, m;
      KScaleMin(blk.scales, e / 32, &sc, &m);
      y[e] = d * static_cast<float>(sc) * static_cast<float>(q) - dmin * static_cast<float>(m);
    }
  }
}

void DequantizeRowQ6_K(const uint8_t* x, float* y, int64_t n) {
  CHECK_EQ(n % 256, 0);
  for (int64_t b = 0; b < n / 256; ++b, y += 256) {
    const auto blk = LoadBlock<BlockQ6_K>(x + b * sizeof(BlockQ6_K));
    const float d = F16ToF32(blk.d);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int lo = (blk.ql[64 * h + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 15;
      const int q = (lo | (((blk.qh[32 * h + l] >> (2 * k)) & 3) << 4)) - 32;
      y[e] = d * static_cast<float>(blk.scales[e / 16]) * static_cast<float>(q);
    }
  }
}

void DequantizeRowIQ4_XS(const uint8_t* x, float* y, int64_t n) {
  CHECK_EQ(n % 256, 0);
  for (int64_t b = 0; b < n / 256; ++b, y += 256) {
    const auto blk = LoadBlock<BlockIQ4_XS>(x + b * sizeof(BlockIQ4_XS));
    const float d = F16ToF32(blk.d);
    for (int j = 0; j < 8; ++j) {
      const int ls =
          ((blk.scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((blk.scales_h >> (2 * j)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      for (int i = 0; i < 16; ++i) {
        y[32 * j + i] = dl * static_cast<float>(kIq4NlValues[blk.qs[16 * j + i] & 15]);
        y[32 * j + i + 16] = dl * static_cast<float>(kIq4NlValues[blk.qs[16 * j + i] >> 4]);
      }
    }
  }
}

}  // namespace pagellm
