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

namespace {

// One group of kG = 32 * kSub elements of x into a Q4_Z block (kSub = 1) or a Q4_Z128 block
// (kSub = 4): asymmetric round to nearest with the range including 0 (as GPTQ's quantizer), so
// z lies in [0, 15] and every x is within half a step of a code.
template <typename Block, int kSub>
Block QuantizeGroupQ4Z(const float* xg) {
  constexpr int kG = 32 * kSub;
  float mn = 0.0f, mx = 0.0f;
  for (int i = 0; i < kG; ++i) {
    mn = std::min(mn, xg[i]);
    mx = std::max(mx, xg[i]);
  }
  Block blk{};
  blk.d = F32ToF16((mx - mn) / 15.0f);
  const float d = F16ToF32(blk.d);
  if (d != 0.0f) {
    // Clamped in float first: x / d may exceed int's range when the group's spread is tiny.
    const int z = static_cast<int>(std::clamp(std::roundf(-mn / d), 0.0f, 15.0f));
    blk.z = static_cast<uint8_t>(z);
    for (int i = 0; i < kG; ++i) {
      const float v = std::clamp(std::roundf(xg[i] / d), -16.0f, 16.0f);
      const int q = std::clamp(static_cast<int>(v) + z, 0, 15);
      const int j = i / 32, e = i % 32;
      blk.qs[16 * j + e % 16] |= static_cast<uint8_t>(q << (e < 16 ? 0 : 4));
    }
  }
  return blk;
}

template <typename Block, int kSub>
void DequantizeGroupQ4Z(const uint8_t* x, float* y) {
  Block blk;
  std::memcpy(&blk, x, sizeof(blk));
  const float d = F16ToF32(blk.d);
  for (int j = 0; j < kSub; ++j) {
    for (int i = 0; i < 16; ++i) {
      y[32 * j + i] = d * static_cast<float>((blk.qs[16 * j + i] & 15) - blk.z);
      y[32 * j + i + 16] = d * static_cast<float>((blk.qs[16 * j + i] >> 4) - blk.z);
    }
  }
}

}  // namespace

void QuantizeRowQ4_Z(const float* x, uint8_t* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b) {
    const BlockQ4_Z blk = QuantizeGroupQ4Z<BlockQ4_Z, 1>(x + 32 * b);
    std::memcpy(y + b * sizeof(BlockQ4_Z), &blk, sizeof(blk));
  }
}

void DequantizeRowQ4_Z(const uint8_t* x, float* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b) {
    DequantizeGroupQ4Z<BlockQ4_Z, 1>(x + b * sizeof(BlockQ4_Z), y + 32 * b);
  }
}

void QuantizeRowQ4_Z128(const float* x, uint8_t* y, int64_t n) {
  CHECK_EQ(n % 128, 0);
  for (int64_t b = 0; b < n / 128; ++b) {
    const BlockQ4_Z128 blk = QuantizeGroupQ4Z<BlockQ4_Z128, 4>(x + 128 * b);
    std::memcpy(y + b * sizeof(BlockQ4_Z128), &blk, sizeof(blk));
  }
}

void DequantizeRowQ4_Z128(const uint8_t* x, float* y, int64_t n) {
  CHECK_EQ(n % 128, 0);
  for (int64_t b = 0; b < n / 128; ++b) {
    DequantizeGroupQ4Z<BlockQ4_Z128, 4>(x + b * sizeof(BlockQ4_Z128), y + 128 * b);
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
