// Per-ISA implementations behind ops.h (one row for RmsNorm). Not a public API.
#pragma once

#include <cstdint>

namespace pagellm::kernels_internal {

struct OpsTable {
  void (*rms_norm_row)(const float* x, const float* weight, int64_t dim, float eps, float* out);
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*add_in_place)(float* x, const float* y, int64_t n);
  void (*softmax)(float* x, int64_t n);
  int64_t (*arg_max)(const float* x, int64_t n);
};

namespace avx2 {
extern const OpsTable kOps;
}
namespace avx512 {
extern const OpsTable kOps;
}

}  // namespace pagellm::kernels_internal
