#include "backend/vector_ops.h"

namespace pagellm {
namespace {

// Eight independent partial sums (combined pairwise at the end) so the scalar loop has the
// same shape as a vector one and does not serialise on one accumulator.
float DotScalar(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void AxpyScalar(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

const VectorOps& GetVectorOps(SimdLevel level) {
  static const VectorOps scalar{DotScalar, AxpyScalar};
  static const VectorOps avx512{vector_ops_internal::DotAvx512, vector_ops_internal::AxpyAvx512};
  return level == SimdLevel::kAvx512 ? avx512 : scalar;
}

const VectorOps& GetVectorOps() {
  return GetVectorOps(ActiveSimdLevel());
}

}  // namespace pagellm
