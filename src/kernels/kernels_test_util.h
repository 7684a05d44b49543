// Test helpers shared by the kernels tests: random data, weight matrices in every dtype, and
// the SIMD levels this CPU can run.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "kernels/quantize.h"
#include "kernels/weight_matrix.h"

namespace pagellm::testing_util {

inline std::vector<SimdLevel> AvailableLevels() {
  std::vector<SimdLevel> levels = {SimdLevel::kScalar};
  if (GetCpuFeatures().avx2) levels.push_back(SimdLevel::kAvx2);
  if (GetCpuFeatures().avx512 && GetCpuFeatures().avx2) levels.push_back(SimdLevel::kAvx512);
  return levels;
}

inline std::vector<float> RandomVector(std::mt19937& rng, int64_t n, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// Owns the bytes behind a WeightMatrix.
struct OwnedWeights {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
};

// A rows x cols matrix of N(0, scale) values converted (quantized) to dtype.
inline OwnedWeights RandomWeights(std::mt19937& rng, DType dtype, int64_t rows, int64_t cols,
                                  float scale = 0.05f) {
  OwnedWeights o;
  o.w.dtype = dtype;
  o.w.rows = rows;
  o.w.cols = cols;
  o.bytes.resize(static_cast<size_t>(o.w.nbytes()));  // exact: ASan catches over-reads
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> row = RandomVector(rng, cols, scale);
    QuantizeRow(dtype, row.data(), o.bytes.data() + r * o.w.row_bytes(), cols);
  }
  o.w.data = o.bytes.data();
  return o;
}

// The matrix as fp32 values (exact: every storage type widens exactly).
inline std::vector<float> Dequantized(const WeightMatrix& w) {
  std::vector<float> out(static_cast<size_t>(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r) DequantizeRow(w.dtype, w.row(r), &out[r * w.cols], w.cols);
  return out;
}

}  // namespace pagellm::testing_util
