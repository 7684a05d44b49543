#include "kernels/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/half.h"
#include "kernels/kernels_test_util.h"

namespace pagellm {
namespace {

using testing_util::RandomVector;

TEST(QuantizeTest, Q8_0KnownValuesAndRounding) {
  // amax = 127 -> d = 1: q = roundf(x), halves away from zero.
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 1.5f;
  x[2] = -2.5f;
  x[3] = 0.49999997f;
  x[4] = -126.6f;
  BlockQ8_0 b;
  QuantizeRowQ8_0(x.data(), &b, 32);
  EXPECT_EQ(F16ToF32(b.d), 1.0f);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 2);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], 0);
  EXPECT_EQ(b.qs[4], -127);
  EXPECT_EQ(b.qs[5], 0);
  // An all-zero block has d = 0 and q = 0 (no NaN from 0 * inf).
  std::vector<float> z(32, 0.0f);
  QuantizeRowQ8_0(z.data(), &b, 32);
  EXPECT_EQ(b.d, 0);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(b.qs[i], 0);
}

TEST(QuantizeTest, Q4_0KnownValues) {
  // The largest |x| is -16 -> d = -16 / -8 = 2, id = 0.5; q = min(15, (int8)(x * 0.5 + 8.5)).
  std::vector<float> x(32, 0.0f);
  x[0] = -16.0f;  // -> 0
  x[1] = 16.0f;   // 16.5 -> 16 -> clamped to 15
  x[2] = 1.0f;    // 9.0 -> 9
  x[16] = -3.0f;  // 7.0 -> 7
  x[31] = 2.9f;   // 9.95 -> 9
  BlockQ4_0 b;
  QuantizeRowQ4_0(x.data(), &b, 32);
  EXPECT_EQ(F16ToF32(b.d), 2.0f);
  EXPECT_EQ(b.qs[0] & 15, 0);
  EXPECT_EQ(b.qs[1] & 15, 15);
  EXPECT_EQ(b.qs[2] & 15, 9);
  EXPECT_EQ(b.qs[3] & 15, 8);  // zero -> 8
  EXPECT_EQ(b.qs[0] >> 4, 7);
  EXPECT_EQ(b.qs[15] >> 4, 9);
  // Ties on |x|: the first element wins, so its sign sets d's sign.
  std::vector<float> y(32, 0.0f);
  y[3] = 8.0f;
  y[7] = -8.0f;
  QuantizeRowQ4_0(y.data(), &b, 32);
  EXPECT_EQ(F16ToF32(b.d), -1.0f);
}

// Round trip through every storage type within each format's resolution.
TEST(QuantizeTest, RoundTripErrorBounds) {
  std::mt19937 rng(21);
  const int64_t n = 4096;
  const std::vector<float> x = RandomVector(rng, n, 3.0f);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    std::vector<uint8_t> bytes(DTypeRowBytes(t, n));
    QuantizeRow(t, x.data(), bytes.data(), n);
    std::vector<float> back(n);
    DequantizeRow(t, bytes.data(), back.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
      for (int i = 0; i < 32; ++i) {
        const int64_t k = 32 * b + i;
        double tol = 0.0;
        switch (t) {
          case DType::kF32:
            tol = 0.0;
            break;
          case DType::kF16:
            tol = std::fabs(x[k]) * 0x1p-11;
            break;
          case DType::kBF16:
            tol = std::fabs(x[k]) * 0x1p-8;
            break;
          // Half a step, plus the fp16 rounding of d (2^-11 relative) over up to 127 / 8 steps.
          case DType::kQ8_0:
            tol = amax / 127.0 * 0.5 + amax * 0x1p-11;
            break;
          // Q4_0 maps the extreme value to -8 steps; values near the opposite extreme clamp to
          // +7 steps, so the bound is one whole step there.
          case DType::kQ4_0:
            tol = amax / 8.0 + amax * 0x1p-10;
            break;
          default:
            break;
        }
        ASSERT_LE(std::fabs(back[k] - x[k]), tol) << DTypeName(t) << " at " << k;
      }
    }
  }
}

// Q4_Z from its definition: x = d * (q - z) exactly for zero points over [0, 16]; the
// asymmetric quantizer keeps each element within half a step d of its input, and a block of
// constant sign uses z = 0 (all >= 0) or z = 15 (all <= 0).
TEST(QuantizeTest, Q4_ZDefinitionAndRoundTrip) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> nib(0, 15), zero(0, 16);
  std::vector<BlockQ4_Z> blocks(8);
  for (BlockQ4_Z& b : blocks) {
    b.d = F32ToF16(std::uniform_real_distribution<float>(-0.1f, 0.1f)(rng));
    b.z = static_cast<uint8_t>(zero(rng));
    for (uint8_t& q : b.qs) q = static_cast<uint8_t>(nib(rng) | nib(rng) << 4);
  }
  std::vector<float> y(256);
  DequantizeRow(DType::kQ4_Z, reinterpret_cast<const uint8_t*>(blocks.data()), y.data(), 256);
  for (int b = 0; b < 8; ++b) {
    BlockQ4_Z blk = blocks[b];
    for (int i = 0; i < 32; ++i) {
      const int q = i < 16 ? blk.qs[i] & 15 : blk.qs[i - 16] >> 4;
      ASSERT_EQ(y[32 * b + i], F16ToF32(blk.d) * static_cast<float>(q - blk.z)) << b << " " << i;
    }
  }

  const std::vector<float> x = RandomVector(rng, 4096);
  std::vector<uint8_t> bytes(DTypeRowBytes(DType::kQ4_Z, 4096));
  std::vector<float> back(4096);
  QuantizeRow(DType::kQ4_Z, x.data(), bytes.data(), 4096);
  DequantizeRow(DType::kQ4_Z, bytes.data(), back.data(), 4096);
  for (int64_t b = 0; b < 128; ++b) {
    BlockQ4_Z blk;
    std::memcpy(&blk, bytes.data() + b * sizeof(blk), sizeof(blk));
    const float d = F16ToF32(blk.d);
    for (int i = 0; i < 32; ++i) {
      ASSERT_LE(std::fabs(back[32 * b + i] - x[32 * b + i]), d * 0.51f) << b << " " << i;
    }
  }
  std::vector<float> pos(32), neg(32);
  for (int i = 0; i < 32; ++i) {
    pos[i] = 0.5f + i;
    neg[i] = -pos[i];
  }
  BlockQ4_Z bp, bn;
  QuantizeRowQ4_Z(pos.data(), reinterpret_cast<uint8_t*>(&bp), 32);
  QuantizeRowQ4_Z(neg.data(), reinterpret_cast<uint8_t*>(&bn), 32);
  EXPECT_EQ(bp.z, 0);
  EXPECT_EQ(bn.z, 15);
}

// Q4_Z128 from its definition: element 32j + i of a block is nibble i % 16 (low for i < 16) of
// qs[16j + i % 16], x = d * (q - z) exactly; the quantizer keeps each element within half a
// step of its input and dequantizes to the same values as Q4_Z blocks with the group's d and z.
TEST(QuantizeTest, Q4_Z128DefinitionAndRoundTrip) {
  std::mt19937 rng(13);
  std::uniform_int_distribution<int> nib(0, 15), zero(0, 16);
  std::vector<BlockQ4_Z128> blocks(4);
  for (BlockQ4_Z128& b : blocks) {
    b.d = F32ToF16(std::uniform_real_distribution<float>(-0.1f, 0.1f)(rng));
    b.z = static_cast<uint8_t>(zero(rng));
    for (uint8_t& q : b.qs) q = static_cast<uint8_t>(nib(rng) | nib(rng) << 4);
  }
  std::vector<float> y(512);
  DequantizeRow(DType::kQ4_Z128, reinterpret_cast<const uint8_t*>(blocks.data()), y.data(), 512);
  for (int b = 0; b < 4; ++b) {
    const BlockQ4_Z128& blk = blocks[b];
    for (int e = 0; e < 128; ++e) {
      const int j = e / 32, i = e % 32;
      const int q = i < 16 ? blk.qs[16 * j + i] & 15 : blk.qs[16 * j + i - 16] >> 4;
      ASSERT_EQ(y[128 * b + e], F16ToF32(blk.d) * static_cast<float>(q - blk.z)) << b << " " << e;
    }
  }

  const std::vector<float> x = RandomVector(rng, 4096);
  std::vector<uint8_t> bytes(DTypeRowBytes(DType::kQ4_Z128, 4096));
  std::vector<float> back(4096);
  QuantizeRow(DType::kQ4_Z128, x.data(), bytes.data(), 4096);
  DequantizeRow(DType::kQ4_Z128, bytes.data(), back.data(), 4096);
  for (int64_t b = 0; b < 32; ++b) {
    BlockQ4_Z128 blk;
    std::memcpy(&blk, bytes.data() + b * sizeof(blk), sizeof(blk));
    const float d = F16ToF32(blk.d);
    // The same values as 4 Q4_Z blocks with the group's d and z and the sub-blocks' nibbles.
    for (int j = 0; j < 4; ++j) {
      BlockQ4_Z z32;
      z32.d = blk.d;
      z32.z = blk.z;
      std::memcpy(z32.qs, blk.qs + 16 * j, 16);
      float v[32];
      DequantizeRow(DType::kQ4_Z, reinterpret_cast<const uint8_t*>(&z32), v, 32);
      for (int i = 0; i < 32; ++i) ASSERT_EQ(v[i], back[128 * b + 32 * j + i]) << b << " " << j;
    }
    for (int i = 0; i < 128; ++i) {
      ASSERT_LE(std::fabs(back[128 * b + i] - x[128 * b + i]), d * 0.51f) << b << " " << i;
    }
  }
}

// The GGUF block types' quantizers on N(0, 1) rows: relative RMS error of the round trip
// within what the format's code width allows (about step / sqrt(12) for a step of range /
// levels, with the search's gain), a zero row exact, a constant row within 1%. (Their accuracy
// against llama.cpp's own quantizer on real files is in tests/kquant_ref_test.cc.)
TEST(QuantizeTest, BlockTypeQuantizersRoundTrip) {
  const struct {
    DType type;
    double max_rel_rms;
  } cases[] = {{DType::kQ4_1, 0.11},   {DType::kQ5_0, 0.06},  {DType::kQ5_1, 0.055},
               {DType::kIQ4_NL, 0.11}, {DType::kQ2_K, 0.36},  {DType::kQ3_K, 0.2},
               {DType::kQ4_K, 0.11},   {DType::kQ5_K, 0.055}, {DType::kQ6_K, 0.03},
               {DType::kIQ4_XS, 0.11}};
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n = 4096;
  std::vector<float> x(n), back(n);
  for (float& v : x) v = nd(rng);
  for (const auto& c : cases) {
    std::vector<uint8_t> bytes(DTypeRowBytes(c.type, n));
    QuantizeRow(c.type, x.data(), bytes.data(), n);
    DequantizeRow(c.type, bytes.data(), back.data(), n);
    double se = 0, sx = 0;
    for (int64_t i = 0; i < n; ++i) {
      se += (back[i] - x[i]) * double{back[i] - x[i]};
      sx += x[i] * double{x[i]};
    }
    const double rel = std::sqrt(se / sx);
    EXPECT_LE(rel, c.max_rel_rms) << DTypeName(c.type);
    std::printf("%-7s relative RMS error %.4f\n", std::string(DTypeName(c.type)).c_str(), rel);

    std::vector<float> zero(n, 0.0f), constant(n, 0.75f);
    QuantizeRow(c.type, zero.data(), bytes.data(), n);
    DequantizeRow(c.type, bytes.data(), back.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 0.0f) << DTypeName(c.type) << " at " << i;
    QuantizeRow(c.type, constant.data(), bytes.data(), n);
    DequantizeRow(c.type, bytes.data(), back.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(back[i], 0.75f, 0.0075f) << DTypeName(c.type) << " at " << i;
  }
}

TEST(QuantizeTest, DequantizeDecodesLayout) {
  BlockQ4_0 q4;
  q4.d = F32ToF16(0.5f);
  for (int i = 0; i < 16; ++i) q4.qs[i] = static_cast<uint8_t>(i | ((15 - i) << 4));
  float out[32];
  DequantizeRow(DType::kQ4_0, reinterpret_cast<const uint8_t*>(&q4), out, 32);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(out[i], 0.5f * (i - 8));
    EXPECT_EQ(out[i + 16], 0.5f * (7 - i));
  }
  BlockQ8_0 q8;
  q8.d = F32ToF16(0.25f);
  for (int i = 0; i < 32; ++i) q8.qs[i] = static_cast<int8_t>(i * 8 - 128);
  DequantizeRow(DType::kQ8_0, reinterpret_cast<const uint8_t*>(&q8), out, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 0.25f * (i * 8 - 128));
}

TEST(QuantizeTest, HalfConversionsRoundToNearestEven) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {1.0f,
                                -2.5f,
                                65504.0f,
                                1e6f,
                                -1e6f,
                                nan,
                                0.0f,
                                -0.0f,
                                1.0f + 0x1p-11f,      // f16 tie -> even (1.0)
                                1.0f + 3 * 0x1p-11f,  // f16 tie -> even (1 + 2^-9)
                                1.0f + 0x1p-8f,       // bf16 tie -> even (1.0)
                                5.96e-8f};            // smallest f16 subnormal
  std::vector<uint16_t> h(x.size()), b(x.size());
  ConvertF32ToF16(x.data(), h.data(), static_cast<int64_t>(x.size()));
  ConvertF32ToBf16(x.data(), b.data(), static_cast<int64_t>(x.size()));
  std::vector<float> hf(x.size()), bf(x.size());
  ConvertF16ToF32(h.data(), hf.data(), static_cast<int64_t>(x.size()));
  ConvertBf16ToF32(b.data(), bf.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(hf[0], 1.0f);
  EXPECT_EQ(hf[1], -2.5f);
  EXPECT_EQ(hf[2], 65504.0f);
  EXPECT_EQ(hf[3], inf);
  EXPECT_EQ(hf[4], -inf);
  EXPECT_TRUE(std::isnan(hf[5]));
  EXPECT_TRUE(std::isnan(bf[5]));
  EXPECT_EQ(hf[6], 0.0f);
  EXPECT_TRUE(std::signbit(hf[7]));
  EXPECT_EQ(hf[8], 1.0f);
  EXPECT_EQ(hf[9], 1.0f + 0x1p-9f);
  EXPECT_EQ(bf[10], 1.0f);
  EXPECT_EQ(hf[11], 0x1p-24f);
  EXPECT_EQ(bf[0], 1.0f);
  EXPECT_EQ(bf[1], -2.5f);
}

TEST(QuantizeTest, F32RowIsACopy) {
  std::mt19937 rng(22);
  const std::vector<float> x = RandomVector(rng, 37);
  std::vector<uint8_t> bytes(37 * 4);
  QuantizeRow(DType::kF32, x.data(), bytes.data(), 37);
  std::vector<float> back(37);
  DequantizeRow(DType::kF32, bytes.data(), back.data(), 37);
  EXPECT_EQ(0, std::memcmp(back.data(), x.data(), 37 * sizeof(float)));
}

}  // namespace
}  // namespace pagellm
