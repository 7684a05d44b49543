// Elementwise and row-wise fp32 operators of the transformer block. All are deterministic and
// batch invariant: a row's result depends only on that row (fixed summation order per SIMD
// level), never on how many rows are processed together.
#pragma once

#include <cstdint>

#include "base/cpu_features.h"

namespace pagellm {

// out[i][j] = x[i][j] / sqrt(mean_j(x[i][j]^2) + eps) * weight[j] for i < n_rows, j < dim.
// Sum of squares in fp32 with a fixed lane order. out may alias x.
void RmsNorm(const float* x, const float* weight, float eps, float* out, int64_t n_rows,
             int64_t dim);

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)); ~1e-7 relative error.
// out may alias gate or up.
void SiluMul(const float* gate, const float* up, float* out, int64_t n);

// out[i] = gelu_tanh(gate[i]) * up[i], gelu_tanh(g) = g/2 · (1 + tanh(sqrt(2/pi) ·
// (g + 0.044715 g³))) (PyTorch's approximate="tanh"); ~1e-7 relative error. out may alias gate
// or up.
void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n);

// In place: x[i] = cap · tanh(x[i] / cap) (logit soft-capping). cap > 0.
void SoftCap(float* x, int64_t n, float cap);

// x[i] += y[i].
void AddInPlace(float* x, const float* y, int64_t n);

// In place: x[i] = exp(x[i] - max) / sum_j exp(x[j] - max). n > 0.
void Softmax(float* x, int64_t n);

// Index of the largest element (the first one on ties); NaNs are ignored; 0 if all are NaN.
// n > 0.
int64_t ArgMax(const float* x, int64_t n);

// out[i] = x[i] as fp16, round to nearest even, with NaN -> 0 and values beyond the fp16 range
// (infinities included) -> +-65504: the 16-bit KV cache's row store (kv_quant.h). Every level
// gives the scalar result bit for bit.
void SaturateToF16(const float* x, int64_t n, uint16_t* out);

// The same operations at an explicit SIMD level (tests, benchmarks). CHECK-fails if the CPU
// lacks the level.
void RmsNormAtLevel(SimdLevel level, const float* x, const float* weight, float eps, float* out,
                    int64_t n_rows, int64_t dim);
void SiluMulAtLevel(SimdLevel level, const float* gate, const float* up, float* out, int64_t n);
void GeluTanhMulAtLevel(SimdLevel level, const float* gate, const float* up, float* out, int64_t n);
void AddInPlaceAtLevel(SimdLevel level, float* x, const float* y, int64_t n);
void SoftmaxAtLevel(SimdLevel level, float* x, int64_t n);
int64_t ArgMaxAtLevel(SimdLevel level, const float* x, int64_t n);
void SaturateToF16AtLevel(SimdLevel level, const float* x, int64_t n, uint16_t* out);

}  // namespace pagellm
