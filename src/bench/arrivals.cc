#include "bench/arrivals.h"

#include <cmath>
#include <random>

#include "fmt/format.h"

namespace pagellm::bench {

StatusOr<std::vector<double>> ArrivalTimes(int n, double rate, double burstiness, uint64_t seed) {
  if (n < 0) return InvalidArgumentError("number of requests must be >= 0");
  if (!(rate > 0))
    return InvalidArgumentError(fmt::format("request rate must be > 0, got {}", rate));
  if (!(burstiness > 0) || !std::isfinite(burstiness))
    return InvalidArgumentError(fmt::format("burstiness must be > 0, got {}", burstiness));
  std::vector<double> times(static_cast<size_t>(n), 0.0);
  if (std::isinf(rate)) return times;
  std::mt19937_64 rng(seed);
  std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
  double t = 0;
  for (int i = 1; i < n; ++i) {
    t += gap(rng);
    times[static_cast<size_t>(i)] = t;
  }
  return times;
}

}  // namespace pagellm::bench
