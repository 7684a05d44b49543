#include "sample/sampler_state.h"

#include <cmath>

namespace pagellm {

uint64_t SeedSource::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double SamplerState::NextExponential() {
  // 1 - u lies in (0, 1], so the logarithm is finite.
  return -std::log1p(-NextUniform());
}

}  // namespace pagellm
