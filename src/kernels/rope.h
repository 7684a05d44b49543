// Rotary position embedding: precomputed cos/sin tables and in-place rotation of q/k heads.
#pragma once

#include <cstdint>
#include <vector>

#include <vector>

namespace pagellm {

enum class RopeScalingType { kNone, kLinear, kLlama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  float factor = 1.0f;
  // llama3 only:
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position_embeddings = 8192;
};

// What the tables are built from (a model's config supplies it; see ModelConfig).
struct RopeParams {
  int head_dim = 0;
  float theta = 10000.0f;
  RopeScaling scaling;
  // Per-pair divisors of the inverse frequencies ([head_dim / 2]); when set they replace the
  // rule of `scaling` (GGUF `rope_freqs.weight`).
  std::vector<float> freq_divisors;
  bool interleaved = false;  // pairs (x[2i], x[2i+1]) instead of rotate_half (x[i], x[i+d/2])
};

class RopeTable {
 public:
  RopeTable() = default;
  // Tables for positions [0, max_positions). Frequencies follow the config's theta and
  // scaling (linear: positions divided by factor; llama3: per-frequency smoothing).
  RopeTable(const RopeParams& params, int max_positions);

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
