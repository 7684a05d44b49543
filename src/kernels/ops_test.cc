#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kernels_test_util.h"

namespace pagellm {
namespace {

using testing_util::AvailableLevels;
using testing_util::RandomVector;

constexpr float kInf = std::numeric_limits<float>::infinity();

double SiluMulRef(double g, double u) {
  return g / (1.0 + std::exp(-g)) * u;
}

TEST(OpsTest, RmsNormMatchesFloat64AndIsRowInvariant) {
  std::mt19937 rng(11);
  for (int64_t dim : {1, 7, 16, 33, 2048, 4099}) {
    const int64_t rows = 3;
    const std::vector<float> x = RandomVector(rng, rows * dim, 2.0f);
    const std::vector<float> weight = RandomVector(rng, dim, 1.0f);
    const float eps = 1e-5f;
    for (SimdLevel level : AvailableLevels()) {
      SCOPED_TRACE(std::string(SimdLevelName(level)) + " dim " + std::to_string(dim));
      std::vector<float> out(rows * dim);
      RmsNormAtLevel(level, x.data(), weight.data(), eps, out.data(), rows, dim);
      for (int64_t i = 0; i < rows; ++i) {
        double ss = 0.0;
        for (int64_t j = 0; j < dim; ++j)
          ss += static_cast<double>(x[i * dim + j]) * x[i * dim + j];
        const double scale = 1.0 / std::sqrt(ss / dim + eps);
        for (int64_t j = 0; j < dim; ++j) {
          const double ref = x[i * dim + j] * scale * weight[j];
          ASSERT_NEAR(out[i * dim + j], ref, 2e-6 * std::fabs(ref) + 1e-30) << i << "," << j;
        }
        // The same row alone, and in place, gives the same bits.
        std::vector<float> one(x.begin() + i * dim, x.begin() + (i + 1) * dim);
        RmsNormAtLevel(level, one.data(), weight.data(), eps, one.data(), 1, dim);
        ASSERT_EQ(0, std::memcmp(one.data(), &out[i * dim], dim * sizeof(float)));
      }
    }
  }
}

TEST(OpsTest, SiluMulAccurateOverWideRange) {
  // Dense sweep over [-100, 100] plus extremes; up = 1 isolates silu, then random up.
  std::vector<float> gate;
  for (int i = -100000; i <= 100000; ++i) gate.push_back(static_cast<float>(i) * 1e-3f);
  for (float v : {0.0f, -0.0f, 88.0f, 89.0f, -87.0f, -88.7f, -104.0f, -200.0f, 1e30f, -1e30f,
                  1e-30f, -1e-30f, 3.4e38f, -3.4e38f}) {
    gate.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(gate.size());
  std::mt19937 rng(12);
  for (bool unit_up : {true, false}) {
    std::vector<float> up = unit_up ? std::vector<float>(n, 1.0f) : RandomVector(rng, n);
    for (SimdLevel level : AvailableLevels()) {
      std::vector<float> out(n);
      SiluMulAtLevel(level, gate.data(), up.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double ref = SiluMulRef(gate[i], up[i]);
        ASSERT_FALSE(std::isnan(out[i])) << SimdLevelName(level) << " g=" << gate[i];
        // ~2 ulp from exp, plus the divide and multiplies; denormal results get an absolute
        // allowance.
        ASSERT_NEAR(out[i], ref, 1e-6 * std::fabs(ref) + 1e-37)
            << SimdLevelName(level) << " g=" << gate[i] << " u=" << up[i];
      }
      // Any length (tails), and in place.
      for (int64_t len : {1, 5, 8, 15, 17, 31}) {
        std::vector<float> g(gate.begin() + 1000, gate.begin() + 1000 + len);
        SiluMulAtLevel(level, g.data(), up.data() + 1000, g.data(), len);
        ASSERT_EQ(0, std::memcmp(g.data(), out.data() + 1000, len * sizeof(float)));
      }
    }
  }
}

TEST(OpsTest, GeluTanhMulAccurateOverWideRange) {
  // PyTorch's gelu(approximate="tanh") in float64, times up.
  auto ref_at = [](double g, double u) {
    return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * u;
  };
  std::vector<float> gate;
  for (int i = -30000; i <= 30000; ++i) gate.push_back(static_cast<float>(i) * 1e-3f);
  for (float v :
       {0.0f, -0.0f, 9.0f, -9.0f, 88.0f, -88.0f, -200.0f, 1e10f, -1e10f, 1e-30f, -1e-30f}) {
    gate.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(gate.size());
  std::mt19937 rng(14);
  for (bool unit_up : {true, false}) {
    std::vector<float> up = unit_up ? std::vector<float>(n, 1.0f) : RandomVector(rng, n);
    for (SimdLevel level : AvailableLevels()) {
      std::vector<float> out(n);
      GeluTanhMulAtLevel(level, gate.data(), up.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double ref = ref_at(gate[i], up[i]);
        ASSERT_FALSE(std::isnan(out[i])) << SimdLevelName(level) << " g=" << gate[i];
        // For g < -5 the result is a tiny tail of ~exp(-1.6 |g|^3 / 22): relative 1e-6 of it
        // or an absolute allowance at the float32 resolution of the inputs.
        ASSERT_NEAR(out[i], ref, 2e-6 * std::fabs(ref) + 1e-7 * std::fabs(up[i]) * 1e-6)
            << SimdLevelName(level) << " g=" << gate[i] << " u=" << up[i];
      }
      for (int64_t len : {1, 5, 8, 15, 17, 31}) {
        std::vector<float> g(gate.begin() + 1000, gate.begin() + 1000 + len);
        GeluTanhMulAtLevel(level, g.data(), up.data() + 1000, g.data(), len);
        ASSERT_EQ(0, std::memcmp(g.data(), out.data() + 1000, len * sizeof(float)));
      }
    }
  }
}

TEST(OpsTest, SoftCapIsCapTimesTanh) {
  std::vector<float> x = {0.0f, 1.0f, -3.0f, 30.0f, 1e6f, -1e6f, 1e-20f};
  const std::vector<float> in = x;
  SoftCap(x.data(), static_cast<int64_t>(x.size()), 30.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = 30.0 * std::tanh(static_cast<double>(in[i]) / 30.0);
    EXPECT_NEAR(x[i], ref, 1e-6 * std::fabs(ref) + 1e-30) << in[i];
  }
}

TEST(OpsTest, AddInPlaceExact) {
  std::mt19937 rng(13);
  for (int64_t n : {1, 9, 16, 100}) {
    const std::vector<float> a = RandomVector(rng, n), b = RandomVector(rng, n);
    for (SimdLevel level : AvailableLevels()) {
      std::vector<float> x = a;
      AddInPlaceAtLevel(level, x.data(), b.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], a[i] + b[i]);
    }
  }
}

TEST(OpsTest, SoftmaxMatchesFloat64) {
  std::mt19937 rng(14);
  for (int64_t n : {1, 3, 16, 17, 128, 1000}) {
    std::vector<float> x = RandomVector(rng, n, 5.0f);
    if (n > 2) x[1] = -kInf;  // a masked position
    for (SimdLevel level : AvailableLevels()) {
      std::vector<float> y = x;
      SoftmaxAtLevel(level, y.data(), n);
      double m = -kInf, sum = 0.0;
      for (float v : x) m = std::max<double>(m, v);
      for (float v : x) sum += std::exp(v - m);
      double total = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const double ref = std::exp(x[i] - m) / sum;
        // fp32 x - max carries up to 2^-24 * |x - max| absolute error into the exponent.
        const double rel = std::isinf(x[i]) ? 0.0 : 1e-6 + 1.2e-7 * std::fabs(x[i] - m);
        ASSERT_NEAR(y[i], ref, rel * ref + 1e-38) << SimdLevelName(level) << " n " << n;
        total += y[i];
      }
      EXPECT_NEAR(total, 1.0, 1e-5);
      if (n > 2) {
        EXPECT_EQ(y[1], 0.0f);
      }
    }
  }
}

TEST(OpsTest, ArgMaxFirstMaximumIgnoringNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    std::vector<float> x;
    int64_t want;
  };
  std::vector<Case> cases = {
      {{1.0f}, 0},     {{1.0f, 3.0f, 3.0f, 2.0f}, 1}, {{nan, -1.0f, nan, -0.5f}, 3},
      {{nan, nan}, 0}, {{-kInf, -kInf, nan}, 0},      {{-kInf, kInf, kInf}, 1},
  };
  // Long vectors: the maximum in the SIMD body, in the tail, and duplicated.
  for (int64_t n : {17, 100, 1027}) {
    for (int64_t pos : {int64_t{0}, n / 2, n - 1}) {
      std::vector<float> x(n);
      for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 13) - 20.0f;
      x[pos] = 5.0f;
      if (pos + 3 < n) x[pos + 3] = 5.0f;
      if (pos > 0) x[pos - 1] = nan;
      cases.push_back({x, pos});
    }
  }
  for (const Case& c : cases) {
    for (SimdLevel level : AvailableLevels()) {
      EXPECT_EQ(ArgMaxAtLevel(level, c.x.data(), static_cast<int64_t>(c.x.size())), c.want)
          << SimdLevelName(level) << " size " << c.x.size();
    }
  }
}

TEST(OpsTest, SaturateToF16RoundsToNearestEvenAndSaturates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Expected fp16 bit patterns from the IEEE binary16 definition (1 sign, 5 exponent bits with
  // bias 15, 10 fraction bits; the smallest subnormal is 2^-24), round to nearest even.
  const std::vector<std::pair<float, uint16_t>> cases = {
      {1.0f, 0x3C00},
      {-2.0f, 0xC000},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {65504.0f, 0x7BFF},
      {65519.0f, 0x7BFF},  // would round to inf; saturated first
      {1e9f, 0x7BFF},
      {kInf, 0x7BFF},
      {-kInf, 0xFBFF},
      {nan, 0x0000},
      {std::ldexp(1.0f, -24), 0x0001},
      {std::ldexp(1.0f, -25), 0x0000},         // halfway to the smallest subnormal: even (0)
      {std::ldexp(3.0f, -25), 0x0002},         // 1.5 units: even (2)
      {1.0f + std::ldexp(1.0f, -11), 0x3C00},  // halfway between 0x3C00 and 0x3C01
      {1.0f + std::ldexp(3.0f, -11), 0x3C02},  // halfway between 0x3C01 and 0x3C02
      {std::ldexp(1.0f, -14), 0x0400},         // smallest normal
  };
  for (SimdLevel level : AvailableLevels()) {
    // Each value alone, and all of them in one row (SIMD body and tail).
    std::vector<float> row;
    for (const auto& [x, want] : cases) {
      uint16_t got = 0xFFFF;
      SaturateToF16AtLevel(level, &x, 1, &got);
      EXPECT_EQ(got, want) << SimdLevelName(level) << " x " << x;
      row.push_back(x);
    }
    std::vector<uint16_t> out(row.size());
    SaturateToF16AtLevel(level, row.data(), static_cast<int64_t>(row.size()), out.data());
    for (size_t i = 0; i < cases.size(); ++i)
      EXPECT_EQ(out[i], cases[i].second) << SimdLevelName(level) << " index " << i;
  }
  // Random rows of every length class: every level equals the scalar level bit for bit.
  std::mt19937 rng(5);
  for (int64_t n : {1, 7, 8, 15, 16, 17, 128, 1027}) {
    std::vector<float> x = RandomVector(rng, n, 70000.0f);
    for (int64_t i = 0; i < n; i += 5) x[i] *= 1e-6f;  // subnormal fp16 range
    std::vector<uint16_t> want(n), got(n);
    SaturateToF16AtLevel(SimdLevel::kScalar, x.data(), n, want.data());
    for (SimdLevel level : AvailableLevels()) {
      SaturateToF16AtLevel(level, x.data(), n, got.data());
      EXPECT_EQ(got, want) << SimdLevelName(level) << " n " << n;
    }
  }
}

TEST(OpsTest, DefaultLevelEntryPoints) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> w(4, 1.0f);
  std::vector<float> out(4);
  RmsNorm(x.data(), w.data(), 0.0f, out.data(), 1, 4);
  EXPECT_NEAR(out[3], 4.0f / std::sqrt(7.5f), 1e-6f);
  SiluMul(x.data(), w.data(), out.data(), 4);
  EXPECT_NEAR(out[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  AddInPlace(x.data(), w.data(), 4);
  EXPECT_EQ(x[0], 2.0f);
  EXPECT_EQ(ArgMax(x.data(), 4), 3);
  Softmax(x.data(), 4);
  EXPECT_NEAR(x[0] + x[1] + x[2] + x[3], 1.0f, 1e-6f);
}

}  // namespace
}  // namespace pagellm
