// Per-ISA implementations behind ops.h (one row for RmsNorm). Not a public API.
#pragma once

#include <cstdint>

namespace pagellm::kernels_internal {

struct OpsTable {
  void (*rms_norm_row)(const float* x, const float* weight, int64_t dim, float eps, float* out);
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*gelu_tanh_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*add_in_place)(float* x, const float* y, int64_t n);
  void (*softmax)(float* x, int64_t n);
  int64_t (*arg_max)(const float* x, int64_t n);
  void (*saturate_to_f16)(const float* x, int64_t n, uint16_t* out);
};

// gelu_tanh(g) = g/2 · (1 + tanh(u)) = g · sigmoid(2u), u = sqrt(2/pi) · (g + 0.044715 g³):
// every level computes z = 2u = g · (kGeluC1 + kGeluC3 · g²), then g · sigmoid(z) as SiluMul
// does (e = exp(-|z|) <= 1, no overflow).
inline constexpr float kGeluC1 = 1.5957691216057308f;  // 2 sqrt(2/pi)
inline constexpr float kGeluC3 = 1.5957691216057308f * 0.044715f;
// Largest finite fp16.
inline constexpr float kF16Max = 65504.0f;

namespace avx2 {
extern const OpsTable kOps;
}
namespace avx512 {
extern const OpsTable kOps;
}

}  // namespace pagellm::kernels_internal
