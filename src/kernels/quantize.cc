#include "kernels/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/half.h"
#include "kernels/weight_format.h"
#include "pagellm/check.h"

namespace pagellm {

void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    for (int i = 0; i < 32; ++i) y[b].qs[i] = static_cast<int8_t>(std::roundf(xb[i] * id));
  }
}

void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < 32; ++i) {
      if (amax < std::fabs(xb[i])) {
        amax = std::fabs(xb[i]);
        max = xb[i];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F32ToF16(d);
    for (int i = 0; i < 16; ++i) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(xb[i] * id + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(xb[i + 16] * id + 8.5f)));
      y[b].qs[i] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b) {
    BlockQ8_0 blk;
    std::memcpy(&blk, x + b, sizeof(blk));
    const float d = F16ToF32(blk.d);
    for (int i = 0; i < 32; ++i) y[32 * b + i] = d * static_cast<float>(blk.qs[i]);
  }
}

void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b) {
    BlockQ4_0 blk;
    std::memcpy(&blk, x + b, sizeof(blk));
    const float d = F16ToF32(blk.d);
    for (int i = 0; i < 16; ++i) {
      y[32 * b + i] = d * static_cast<float>((blk.qs[i] & 15) - 8);
      y[32 * b + i + 16] = d * static_cast<float>((blk.qs[i] >> 4) - 8);
    }
  }
}

void QuantizeRowQ4_Z(const float* x, uint8_t* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    // The range includes 0 (as GPTQ's quantizer), so z lies in [0, 15] and every x is within
    // half a step of a code.
    float mn = 0.0f, mx = 0.0f;
    for (int i = 0; i < 32; ++i) {
      mn = std::min(mn, xb[i]);
      mx = std::max(mx, xb[i]);
    }
    BlockQ4_Z blk{};
    blk.d = F32ToF16((mx - mn) / 15.0f);
    const float d = F16ToF32(blk.d);
    if (d != 0.0f) {
      // Clamped in float first: x / d may exceed int's range when the block's spread is tiny.
      const int z = static_cast<int>(std::clamp(std::roundf(-mn / d), 0.0f, 15.0f));
      blk.z = static_cast<uint8_t>(z);
      for (int i = 0; i < 32; ++i) {
        const float v = std::clamp(std::roundf(xb[i] / d), -16.0f, 16.0f);
        const int q = std::clamp(static_cast<int>(v) + z, 0, 15);
        blk.qs[i % 16] |= static_cast<uint8_t>(q << (i < 16 ? 0 : 4));
      }
    }
    std::memcpy(y + b * sizeof(BlockQ4_Z), &blk, sizeof(blk));
  }
}

void DequantizeRowQ4_Z(const uint8_t* x, float* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b) {
    BlockQ4_Z blk;
    std::memcpy(&blk, x + b * sizeof(BlockQ4_Z), sizeof(blk));
    const float d = F16ToF32(blk.d);
    for (int i = 0; i < 16; ++i) {
      y[32 * b + i] = d * static_cast<float>((blk.qs[i] & 15) - blk.z);
      y[32 * b + i + 16] = d * static_cast<float>((blk.qs[i] >> 4) - blk.z);
    }
  }
}

void QuantizeRow(DType t, const float* x, uint8_t* dst, int64_t n) {
  const WeightFormat& f = GetWeightFormat(t);
  CHECK(f.quantize != nullptr) << "cannot quantize to " << f.name;
  f.quantize(x, dst, n);
}

void DequantizeRow(DType t, const uint8_t* src, float* dst, int64_t n) {
  const WeightFormat& f = GetWeightFormat(t);
  CHECK(f.dequantize != nullptr) << "cannot dequantize " << f.name;
  f.dequantize(src, dst, n);
}

void ConvertF32ToF16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = F32ToF16(x[i]);
}

void ConvertF32ToBf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = F32ToBf16(x[i]);
}

void ConvertF16ToF32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = F16ToF32(x[i]);
}

void ConvertBf16ToF32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Bf16ToF32(x[i]);
}

}  // namespace pagellm
