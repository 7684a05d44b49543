#include "kernels/rope.h"

#include <cmath>

#include "pagellm/check.h"

namespace pagellm {

RopeTable::RopeTable(const RopeParams& config, int max_positions)
    : head_dim_(config.head_dim), max_positions_(max_positions), interleaved_(config.interleaved) {
  const int half = head_dim_ / 2;
  inv_freq_.resize(half);
  for (int i = 0; i < half; ++i)
    inv_freq_[i] = 1.0 / std::pow(static_cast<double>(config.theta), 2.0 * i / head_dim_);
  const RopeScaling& rs = config.scaling;
  if (!config.freq_divisors.empty()) {
    CHECK_EQ(static_cast<int>(config.freq_divisors.size()), half);
    for (int i = 0; i < half; ++i) inv_freq_[i] /= config.freq_divisors[i];
  } else if (rs.type == RopeScalingType::kLlama3) {
    // Long wavelengths are slowed down by `factor`, short ones kept, the band between
    // interpolated (Llama 3.1 recipe).
    const double low_wavelen = rs.original_max_position_embeddings / rs.low_freq_factor;
    const double high_wavelen = rs.original_max_position_embeddings / rs.high_freq_factor;
    for (int i = 0; i < half; ++i) {
      const double wavelen = 2.0 * M_PI / inv_freq_[i];
      if (wavelen > low_wavelen) {
        inv_freq_[i] /= rs.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (rs.original_max_position_embeddings / wavelen - rs.low_freq_factor) /
                              (rs.high_freq_factor - rs.low_freq_factor);
        inv_freq_[i] = (1.0 - smooth) * inv_freq_[i] / rs.factor + smooth * inv_freq_[i];
      }
    }
  } else if (rs.type == RopeScalingType::kLinear) {
    for (double& f : inv_freq_) f /= rs.factor;
  }
  cos_.resize(static_cast<size_t>(max_positions_) * half);
  sin_.resize(cos_.size());
  for (int p = 0; p < max_positions_; ++p) {
    for (int i = 0; i < half; ++i) {
      // Angle, cos and sin in double, rounded once: closest to a float64 reference.
      const double angle = static_cast<double>(p) * inv_freq_[i];
      cos_[static_cast<size_t>(p) * half + i] = static_cast<float>(std::cos(angle));
      sin_[static_cast<size_t>(p) * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void RopeTable::Apply(float* heads, int num_heads, int pos) const {
  CHECK_LT(pos, max_positions_);
  const int half = head_dim_ / 2;
  const float* c = cos_.data() + static_cast<size_t>(pos) * half;
  const float* s = sin_.data() + static_cast<size_t>(pos) * half;
  for (int h = 0; h < num_heads; ++h) {
    float* x = heads + static_cast<int64_t>(h) * head_dim_;
    if (interleaved_) {
      for (int i = 0; i < half; ++i) {
        const float a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = a * c[i] - b * s[i];
        x[2 * i + 1] = a * s[i] + b * c[i];
      }
    } else {
      for (int i = 0; i < half; ++i) {
        const float a = x[i], b = x[i + half];
        x[i] = a * c[i] - b * s[i];
        x[i + half] = a * s[i] + b * c[i];
      }
    }
  }
}

}  // namespace pagellm
