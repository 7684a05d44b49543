// Dispatch of ops.h to the per-ISA tables, and the portable (scalar) implementations.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/half.h"
#include "kernels/ops_internal.h"
#include "pagellm/check.h"

namespace pagellm {
namespace {

using kernels_internal::kGeluC1;
using kernels_internal::kGeluC3;
using kernels_internal::OpsTable;

void RmsNormRowScalar(const float* x, const float* weight, int64_t dim, float eps, float* out) {
  float ss = 0.0f;
  for (int64_t j = 0; j < dim; ++j) ss += x[j] * x[j];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
  for (int64_t j = 0; j < dim; ++j) out[j] = x[j] * scale * weight[j];
}

// silu(g) = g * sigmoid(g) with e = exp(-|g|) <= 1, which never overflows:
// sigmoid(g) = 1 / (1 + e) for g >= 0 and e / (1 + e) for g < 0.
void SiluMulScalar(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float e = std::exp(-std::fabs(g));
    out[i] = g * (g >= 0.0f ? 1.0f : e) / (1.0f + e) * up[i];
  }
}

void GeluTanhMulScalar(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float z = g * (kGeluC1 + kGeluC3 * (g * g));
    const float e = std::exp(-std::fabs(z));
    out[i] = g * (z >= 0.0f ? 1.0f : e) / (1.0f + e) * up[i];
  }
}

void AddInPlaceScalar(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void SoftmaxScalar(float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::fmax(m, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

int64_t ArgMaxScalar(const float* x, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
  }
  return best < 0 ? 0 : best;
}

void SaturateToF16Scalar(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::isnan(x[i])
                        ? 0.0f
                        : std::clamp(x[i], -kernels_internal::kF16Max, kernels_internal::kF16Max);
    out[i] = F32ToF16(v);
  }
}

constexpr OpsTable kScalarOps = {RmsNormRowScalar,   SiluMulScalar, GeluTanhMulScalar,
                                 AddInPlaceScalar,   SoftmaxScalar, ArgMaxScalar,
                                 SaturateToF16Scalar};

const OpsTable& OpsAt(SimdLevel level) {
  const CpuFeatures& f = GetCpuFeatures();
  switch (level) {
    case SimdLevel::kScalar:
      return kScalarOps;
    case SimdLevel::kAvx2:
      CHECK(f.avx2) << "CPU lacks AVX2";
      return kernels_internal::avx2::kOps;
    case SimdLevel::kAvx512:
      CHECK(f.avx512 && f.avx2) << "CPU lacks AVX-512";
      return kernels_internal::avx512::kOps;
  }
  return kScalarOps;
}

}  // namespace

void RmsNormAtLevel(SimdLevel level, const float* x, const float* weight, float eps, float* out,
                    int64_t n_rows, int64_t dim) {
  const OpsTable& ops = OpsAt(level);
  for (int64_t i = 0; i < n_rows; ++i)
    ops.rms_norm_row(x + i * dim, weight, dim, eps, out + i * dim);
}

void SiluMulAtLevel(SimdLevel level, const float* gate, const float* up, float* out, int64_t n) {
  OpsAt(level).silu_mul(gate, up, out, n);
}

void GeluTanhMulAtLevel(SimdLevel level, const float* gate, const float* up, float* out,
                        int64_t n) {
  OpsAt(level).gelu_tanh_mul(gate, up, out, n);
}

void AddInPlaceAtLevel(SimdLevel level, float* x, const float* y, int64_t n) {
  OpsAt(level).add_in_place(x, y, n);
}

void SoftmaxAtLevel(SimdLevel level, float* x, int64_t n) {
  CHECK_GT(n, 0);
  OpsAt(level).softmax(x, n);
}

int64_t ArgMaxAtLevel(SimdLevel level, const float* x, int64_t n) {
  CHECK_GT(n, 0);
  return OpsAt(level).arg_max(x, n);
}

void SaturateToF16AtLevel(SimdLevel level, const float* x, int64_t n, uint16_t* out) {
  OpsAt(level).saturate_to_f16(x, n, out);
}

void RmsNorm(const float* x, const float* weight, float eps, float* out, int64_t n_rows,
             int64_t dim) {
  RmsNormAtLevel(ActiveSimdLevel(), x, weight, eps, out, n_rows, dim);
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  SiluMulAtLevel(ActiveSimdLevel(), gate, up, out, n);
}

void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) {
  GeluTanhMulAtLevel(ActiveSimdLevel(), gate, up, out, n);
}

void SoftCap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

void AddInPlace(float* x, const float* y, int64_t n) {
  AddInPlaceAtLevel(ActiveSimdLevel(), x, y, n);
}

void Softmax(float* x, int64_t n) {
  SoftmaxAtLevel(ActiveSimdLevel(), x, n);
}

int64_t ArgMax(const float* x, int64_t n) {
  return ArgMaxAtLevel(ActiveSimdLevel(), x, n);
}

void SaturateToF16(const float* x, int64_t n, uint16_t* out) {
  SaturateToF16AtLevel(ActiveSimdLevel(), x, n, out);
}

}  // namespace pagellm
