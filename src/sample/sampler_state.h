// Per-request random state for sampling, and the engine-wide source of seeds for requests that
// did not set SamplingParams::seed.
#pragma once

#include <cstdint>
#include <optional>
#include <random>

namespace pagellm {

// Hands out seeds for requests without their own seed. The engine owns one, seeded from its
// --seed, and calls Next() once per request in arrival order: a run is then reproducible for a
// fixed engine seed and arrival order, while requests with an explicit seed never depend on it.
// SplitMix64 (Steele, Lea, Flood 2014) because consecutive outputs are well mixed even for
// consecutive engine seeds, and its definition is a few lines (no library-defined behaviour).
class SeedSource {
 public:
  explicit SeedSource(uint64_t engine_seed) : state_(engine_seed) {}
  uint64_t Next();

 private:
  uint64_t state_;
};

// The generator one request samples with. std::mt19937_64 because the C++ standard fixes its
// output sequence for a given seed (unlike the std:: distributions, which are
// implementation-defined and therefore not used: uniforms are built from raw bits below). Every
// request owns its state, so the tokens it draws depend only on its seed and its own logits,
// never on which other requests share the batch.
class SamplerState {
 public:
  explicit SamplerState(uint64_t seed) : rng_(seed) {}
  // `seed` is SamplingParams::seed; without one the next seed of `unseeded` is used.
  SamplerState(std::optional<uint64_t> seed, SeedSource& unseeded)
      : rng_(seed.has_value() ? *seed : unseeded.Next()) {}

  uint64_t NextBits() { return rng_(); }
  // Uniform in [0, 1): the top 53 bits of one draw scaled by 2^-53, so every value is exact.
  double NextUniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  // Exp(1) variate, -log(1 - u); for the exponential-race (Gumbel-max) draws a speculative
  // rejection sampler makes, as vLLM's does.
  double NextExponential();

 private:
  std::mt19937_64 rng_;
};

}  // namespace pagellm
