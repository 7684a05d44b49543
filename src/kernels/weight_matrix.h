// A weight matrix as the kernels consume it: row-major [rows = out_features][cols = in_features],
// each row stored contiguously in `dtype` (quantized rows are whole blocks of 32).
#pragma once

#include <cstdint>

#include "pagellm/dtype.h"

namespace pagellm {

struct WeightMatrix {
  DType dtype = DType::kF32;
  int64_t rows = 0;  // output features
  int64_t cols = 0;  // input features (multiple of 32 for Q8_0/Q4_0)
  const uint8_t* data = nullptr;
  // Optional copy of the same weights in the kernels' packed layout (kernels/packed_weights.h),
  // owned by a PackedWeights; null when there is none. Kernels that have no use for it read
  // `data`. Results are bitwise identical either way.
  const uint8_t* packed = nullptr;

  int64_t row_bytes() const { return DTypeRowBytes(dtype, cols); }
  const uint8_t* row(int64_t r) const { return data + r * row_bytes(); }
  int64_t nbytes() const { return rows * row_bytes(); }
};

}  // namespace pagellm
