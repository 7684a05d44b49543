#include "bench/stats.h"

#include <algorithm>
#include <cmath>

namespace pagellm::bench {

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  p = std::clamp(p, 0.0, 100.0);
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

double Mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

double Median(const std::vector<double>& values) {
  return Percentile(values, 50);
}

double StdDev(const std::vector<double>& values) {
  if (values.empty()) return 0;
  const double m = Mean(values);
  double ss = 0;
  for (double v : values) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(values.size()));
}

Summary Summarize(const std::vector<double>& values, const std::vector<double>& percentiles) {
  Summary s;
  s.mean = Mean(values);
  s.std = StdDev(values);
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  s.median = Percentile(sorted, 50);
  for (double p : percentiles) s.percentiles[p] = Percentile(sorted, p);
  return s;
}

}  // namespace pagellm::bench
