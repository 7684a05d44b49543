// Rotary position embedding: precomputed cos/sin tables and in-place rotation of q/k heads.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace pagellm {

class RopeTable {
 public:
  RopeTable() = default;
  // Tables for positions [0, max_positions). Frequencies follow the config's theta and
  // rope_scaling (linear: positions divided by factor; llama3: per-frequency smoothing).
  RopeTable(const ModelConfig& config, int max_positions);

  // Rotates `num_heads` heads of head_dim floats at `pos` in place.
  // interleaved: pairs (x[2i], x[2i+1]); else rotate_half pairs (x[i], x[i + d/2]).
  void Apply(float* heads, int num_heads, int pos) const;
  int max_positions() const { return max_positions_; }
  // Inverse frequencies [head_dim/2] (exposed for tests).
  const std::vector<double>& inv_freq() const { return inv_freq_; }

 private:
  int head_dim_ = 0;
  int max_positions_ = 0;
  bool interleaved_ = false;
  std::vector<double> inv_freq_;
  std::vector<float> cos_, sin_;  // [max_positions][head_dim/2]
};

}  // namespace pagellm
