// KV cache element formats: round-trip error bounds on random data with outliers, fp8
// saturation (never inf), no NaN from finite or non-finite input, poison decodes to NaN, and
// the storage's copy/poison for every format.
#include "kernels/kv_quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/half.h"
#include "kv/kv_cache_storage.h"

namespace pagellm {
namespace {

const KvCacheDtype kAll[] = {
    KvCacheDtype::kFloat32, KvCacheDtype::kBFloat16, KvCacheDtype::kFloat16, KvCacheDtype::kFp8E4m3,
    KvCacheDtype::kFp8E5m2, KvCacheDtype::kInt8,     KvCacheDtype::kInt4};

std::vector<float> RandomRow(std::mt19937& rng, int d, float sigma) {
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> x(d);
  for (auto& v : x) v = nd(rng);
  x[rng() % d] *= 30;  // an outlier channel, as K has
  return x;
}

TEST(KvQuantTest, RoundTripWithinEachFormatsBound) {
  std::mt19937 rng(7);
  for (int d : {8, 64, 128}) {
    for (float sigma : {0.01f, 1.0f, 20.0f}) {
      for (int trial = 0; trial < 50; ++trial) {
        const std::vector<float> x = RandomRow(rng, d, sigma);
        float lo = x[0], hi = x[0];
        for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
        for (KvCacheDtype dt : kAll) {
          const float layer_scale = dt == KvCacheDtype::kFp8E4m3 ? sigma * 100 / 448 : 1.0f;
          std::vector<uint8_t> row(KvRowBytes(dt, d));
          std::vector<float> y(d);
          QuantizeKvRow(dt, x.data(), d, layer_scale, row.data());
          DequantizeKvRow(dt, row.data(), d, layer_scale, y.data());
          for (int i = 0; i < d; ++i) {
            ASSERT_TRUE(std::isfinite(y[i])) << KvCacheDtypeName(dt);
            const float a = std::abs(x[i]);
            float bound = 0;
            switch (dt) {
              case KvCacheDtype::kFloat32:
                bound = 0;
                break;
              case KvCacheDtype::kBFloat16:
                bound = a * 0x1p-8f;
                break;
              case KvCacheDtype::kFloat16:
                bound = a * 0x1p-11f + 0x1p-25f;
                break;
              case KvCacheDtype::kFp8E4m3:  // relative 2^-4 in the normal range, 2^-10 steps below
                bound = a > 448 * layer_scale ? a - 448 * layer_scale
                                              : std::max(a * 0x1p-4f, 0x1p-10f * layer_scale);
                break;
              case KvCacheDtype::kFp8E5m2:
                bound = std::max(a * 0x1p-3f, 0x1p-17f);
                break;
              case KvCacheDtype::kInt8:
              case KvCacheDtype::kInt4: {
                const float steps = dt == KvCacheDtype::kInt8 ? 255.0f : 15.0f;
                const float scale = (hi - lo) / steps;
                // Half a step, plus the fp16 rounding of the stored zero point and scale; int4
                // may also clip up to 10% of the range off either end (its error search).
                bound = 0.5f * scale + 0x1p-11f * (std::abs(lo) + steps * scale) + 1e-7f;
                if (dt == KvCacheDtype::kInt4) bound += 0.1f * (hi - lo) * 1.001f;
                break;
              }
              default:
                break;
            }
            ASSERT_LE(std::abs(y[i] - x[i]), bound * 1.0001f)
                << KvCacheDtypeName(dt) << " d " << d << " sigma " << sigma << " x " << x[i];
          }
        }
      }
    }
  }
}

TEST(KvQuantTest, Int4ClippingSearchNeverIncreasesTheRowError) {
  // The int4 encoder picks the least-squared-error range among [min, max] narrowed at either
  // end; its error must never exceed that of plain [min, max] (computed here with the same fp16
  // rounding), and on rows with an outlier it must usually be strictly smaller.
  std::mt19937 rng(3);
  int better = 0, rows = 0;
  for (int d : {8, 16, 64, 128}) {
    for (int trial = 0; trial < 100; ++trial, ++rows) {
      const std::vector<float> x = RandomRow(rng, d, 1.0f);
      float lo = x[0], hi = x[0];
      for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
      const float zero = F16ToF32(F32ToF16(lo));
      const float scale = F16ToF32(F32ToF16((hi - zero) / 15.0f));
      double plain = 0, searched = 0;
      std::vector<uint8_t> row(KvRowBytes(KvCacheDtype::kInt4, d));
      std::vector<float> y(d);
      QuantizeKvRow(KvCacheDtype::kInt4, x.data(), d, 1.0f, row.data());
      DequantizeKvRow(KvCacheDtype::kInt4, row.data(), d, 1.0f, y.data());
      for (int i = 0; i < d; ++i) {
        const float q = std::clamp(std::nearbyint((x[i] - zero) / scale), 0.0f, 15.0f);
        plain += std::pow(std::fma(q, scale, zero) - x[i], 2);
        searched += std::pow(y[i] - x[i], 2);
      }
      ASSERT_LE(searched, plain * (1 + 1e-5) + 1e-12) << "d " << d << " trial " << trial;
      better += searched < plain * 0.999;
    }
  }
  EXPECT_GT(better, rows / 2);
}

TEST(KvQuantTest, Fp8SaturatesNeverInfNeverNan) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(Fp8E4m3ToFloat(FloatToFp8E4m3(1e6f)), 448.0f);
  EXPECT_EQ(Fp8E4m3ToFloat(FloatToFp8E4m3(-inf)), -448.0f);
  EXPECT_EQ(Fp8E4m3ToFloat(FloatToFp8E4m3(464.0f)), 448.0f);  // would round to 480 (NaN code)
  EXPECT_EQ(Fp8E4m3ToFloat(FloatToFp8E4m3(nan)), 0.0f);
  EXPECT_EQ(Fp8E5m2ToFloat(FloatToFp8E5m2(inf)), 57344.0f);
  EXPECT_EQ(Fp8E5m2ToFloat(FloatToFp8E5m2(-1e30f)), -57344.0f);
  EXPECT_EQ(Fp8E5m2ToFloat(FloatToFp8E5m2(nan)), 0.0f);
  // Exact values and round-to-nearest-even.
  EXPECT_EQ(Fp8E4m3ToFloat(FloatToFp8E4m3(1.0f)), 1.0f);
  EXPECT_EQ(Fp8E4m3ToFloat(FloatToFp8E4m3(1.0625f)), 1.0f);  // tie -> even mantissa
  EXPECT_EQ(Fp8E4m3ToFloat(FloatToFp8E4m3(1.1875f)), 1.25f);
  EXPECT_EQ(Fp8E4m3ToFloat(FloatToFp8E4m3(0x1p-9f)), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(Fp8E5m2ToFloat(FloatToFp8E5m2(0x1p-16f)), 0x1p-16f);
  // Every code but the NaN ones decodes finite; encode(decode(c)) == c.
  for (int c = 0; c < 256; ++c) {
    const uint8_t b = static_cast<uint8_t>(c);
    if ((b & 0x7F) != 0x7F) {
      ASSERT_TRUE(std::isfinite(Fp8E4m3ToFloat(b))) << c;
      if (b != 0x80) {
        ASSERT_EQ(FloatToFp8E4m3(Fp8E4m3ToFloat(b)), b) << c;
      }
    }
    if ((b & 0x7F) < 0x7C) {
      if (b != 0x80) {
        ASSERT_EQ(FloatToFp8E5m2(Fp8E5m2ToFloat(b)), b) << c;
      }
    }
  }
  // Whole rows with non-finite input decode finite in every format.
  std::vector<float> x = {inf, -inf, nan, 1e30f, -1e30f, 0.5f, 0, -2};
  for (KvCacheDtype dt : kAll) {
    std::vector<uint8_t> row(KvRowBytes(dt, 8));
    std::vector<float> y(8);
    QuantizeKvRow(dt, x.data(), 8, 1.0f, row.data());
    DequantizeKvRow(dt, row.data(), 8, 1.0f, y.data());
    for (float v : y) EXPECT_TRUE(std::isfinite(v)) << KvCacheDtypeName(dt);
  }
}

TEST(KvQuantTest, PoisonDecodesToNanInEveryFormat) {
  for (KvCacheDtype dt : kAll) {
    std::vector<uint8_t> row(KvRowBytes(dt, 16), 0xFF);
    std::vector<float> y(16);
    DequantizeKvRow(dt, row.data(), 16, 1.0f, y.data());
    for (float v : y) EXPECT_TRUE(std::isnan(v)) << KvCacheDtypeName(dt);
  }
}

TEST(KvQuantTest, HadamardIsOrthonormalAndSelfInverse) {
  std::mt19937 rng(3);
  std::vector<float> x = RandomRow(rng, 64, 1.0f), y = x;
  double n0 = 0, n1 = 0;
  for (float v : x) n0 += double{v} * v;
  HadamardRotate(y.data(), 64);
  for (float v : y) n1 += double{v} * v;
  EXPECT_NEAR(n1, n0, 1e-4 * n0);
  HadamardRotate(y.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
  EXPECT_TRUE(KvRowsRotated(KvCacheDtype::kInt4, 64));
  EXPECT_FALSE(KvRowsRotated(KvCacheDtype::kInt4, 48));
  EXPECT_FALSE(KvRowsRotated(KvCacheDtype::kInt8, 64));
}

TEST(KvCacheStorageTest, LayoutCopyAndPoisonForEveryFormat) {
  for (KvCacheDtype dt : kAll) {
    KvCacheShape shape;
    shape.num_layers = 3;
    shape.num_kv_heads = 2;
    shape.head_dim = 32;
    shape.block_size = 4;
    shape.num_blocks = 5;
    shape.dtype = dt;
    shape.skip_layers = {1};
    shape.skip_dtype = KvCacheDtype::kBFloat16;
    StatusOr<KvCacheStorage> a = KvCacheStorage::Create(shape);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    StatusOr<KvCacheStorage> b = KvCacheStorage::Create(shape);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(a->layer_dtype(1), KvCacheDtype::kBFloat16);
    EXPECT_EQ(a->layer_dtype(0), dt);
    EXPECT_EQ(a->row_bytes(0), KvRowBytes(dt, 32));
    EXPECT_EQ(shape.bytes_per_token(), 8 * KvRowBytes(dt, 32) + 2 * 2 * 64);
    a->PoisonWithNaN();
    b->PoisonWithNaN();
    std::vector<float> x(32), y(32);
    for (int i = 0; i < 32; ++i) x[i] = 0.1f * i - 1;
    // Write (layer 2, block 3, slot 1, head 1), copy block 3 -> block 2 of b.
    uint8_t* dst = a->k_row_bytes(2, 3, 1, 1);
    QuantizeKvRow(dt, x.data(), 32, 1.0f, dst);
    b->CopyBlockFrom(*a, 3, 2);
    DequantizeKvRow(dt, b->k_row_bytes(2, 2, 1, 1), 32, 1.0f, y.data());
    std::vector<float> want(32);
    DequantizeKvRow(dt, dst, 32, 1.0f, want.data());
    for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], want[i]) << KvCacheDtypeName(dt);
    // Unwritten rows of the copied block stay poisoned (NaN on decode).
    DequantizeKvRow(dt, b->k_row_bytes(2, 2, 0, 0), 32, 1.0f, y.data());
    EXPECT_TRUE(std::isnan(y[0])) << KvCacheDtypeName(dt);
    DequantizeKvRow(dt, b->v_row_bytes(2, 2, 1, 1), 32, 1.0f, y.data());
    EXPECT_TRUE(std::isnan(y[5])) << KvCacheDtypeName(dt);
  }
  KvCacheShape bad;
  bad.num_layers = 1;
  bad.num_kv_heads = 1;
  bad.head_dim = 8;
  bad.num_blocks = 2;
  bad.dtype = KvCacheDtype::kAuto;
  EXPECT_FALSE(KvCacheStorage::Create(bad).ok());
  bad.dtype = KvCacheDtype::kInt8;
  bad.skip_layers = {3};
  EXPECT_FALSE(KvCacheStorage::Create(bad).ok());
}

TEST(KvCacheStorageTest, KeySpaceNamesTheFormat) {
  KvCacheShape s;
  EXPECT_EQ(KvCacheKeySpace(s), "float32");
  s.dtype = KvCacheDtype::kFp8;
  EXPECT_EQ(KvCacheKeySpace(s), "fp8_e4m3+kcal");  // quantised: K stored smoothed
  s.dtype = KvCacheDtype::kInt4;
  s.skip_layers = {5, 0};
  s.skip_dtype = KvCacheDtype::kFloat16;
  EXPECT_EQ(KvCacheKeySpace(s), "int4+kcal+skip0,5:float16");
}

}  // namespace
}  // namespace pagellm
