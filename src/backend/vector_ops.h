// Small fp32 vector primitives used inside attention, with a scalar reference and SIMD
// versions chosen once at start-up. Each variant has a fixed reduction order, so the same
// inputs always give the same bits on a given machine.
#pragma once

#include <cstdint>

#include "base/cpu_features.h"

namespace pagellm {

struct VectorOps {
  float (*dot)(const float* a, const float* b, int64_t n);
  // y[i] += a * x[i]
  void (*axpy)(float a, const float* x, float* y, int64_t n);
};

const VectorOps& GetVectorOps(SimdLevel level);
const VectorOps& GetVectorOps();  // for ActiveSimdLevel()

namespace vector_ops_internal {
float DotAvx512(const float* a, const float* b, int64_t n);
void AxpyAvx512(float a, const float* x, float* y, int64_t n);
}  // namespace vector_ops_internal

}  // namespace pagellm
