// Request arrival times for `bench serve`, as vLLM's benchmark draws them: inter-arrival gaps
// are Gamma(shape = burstiness, scale = 1 / (rate * burstiness)) seconds, so the mean gap is
// always 1 / rate; burstiness 1 is a Poisson process (exponential gaps), below 1 burstier,
// above 1 more regular. An infinite rate sends everything at t = 0.
#pragma once

#include <cstdint>
#include <vector>

#include "pagellm/status.h"

namespace pagellm::bench {

// Seconds after the start of the benchmark at which each of `n` requests is released. The
// first request goes at t = 0; later ones at the cumulative sum of the gaps. Deterministic for
// a given seed. rate in requests/s (> 0, may be +inf); burstiness > 0.
StatusOr<std::vector<double>> ArrivalTimes(int n, double rate, double burstiness, uint64_t seed);

}  // namespace pagellm::bench
