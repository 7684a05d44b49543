// A weight matrix as the kernels consume it: row-major [rows = out_features][cols = in_features],
// each row stored contiguously in `dtype` (whole blocks of DTypeBlockElems(dtype) elements).
// A format whose file holds several tensors per matrix (kernels/weight_format.h) is repacked
// into such a layout at load; `parts` keeps the tensors it came from.
#pragma once

#include <cstdint>

#include "pagellm/dtype.h"

namespace pagellm {

// One tensor of a weight format as the file holds it: [rows][cols] elements of dtype (e.g.
// AWQ's qweight: I32 [in][out / 8]; its scales: F16 [in / group][out]).
struct WeightTensor {
  const uint8_t* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;

  int64_t nbytes() const { return rows * DTypeRowBytes(dtype, cols); }
};

// Most source tensors of one matrix: codes, scales, zero points, group index (GPTQ).
inline constexpr int kMaxWeightParts = 4;

struct WeightMatrix {
  DType dtype = DType::kF32;
  int64_t rows = 0;  // output features
  int64_t cols = 0;  // input features (a multiple of DTypeBlockElems(dtype))
  const uint8_t* data = nullptr;
  // Optional copy of the same weights in the kernels' packed layout (kernels/packed_weights.h),
  // owned by a PackedWeights; null when there is none. Kernels that have no use for it read
  // `data`. Results are bitwise identical either way.
  const uint8_t* packed = nullptr;
  // Optional input permutation [cols] (GPTQ act-order, kernels/hf_quant_scheme.h): the kernels
  // multiply column j of the stored rows with x[input_perm[j]], i.e. W[o][input_perm[j]] is
  // stored at column j. Null: the identity. MatMul gathers x once per call.
  const int32_t* input_perm = nullptr;
  // With input_perm: columns of the x it indexes when that is wider than `cols` (0: cols). A
  // tensor-parallel rank's share of an act-order matrix's stored columns multiplies the whole
  // input, gathered from every rank (model/tensor_parallel_shard.h); x is [n][input_cols].
  int64_t input_cols = 0;
  // The source tensors of a multi-tensor format, in the order of its WeightFormat::parts, that
  // its bind hook repacked into `data` (num_parts == 0: data is the file's tensor itself).
  // Kernels never read them.
  int num_parts = 0;
  WeightTensor parts[kMaxWeightParts];

  int64_t row_bytes() const { return DTypeRowBytes(dtype, cols); }
  const uint8_t* row(int64_t r) const { return data + r * row_bytes(); }
  int64_t nbytes() const { return rows * row_bytes(); }
};

}  // namespace pagellm
