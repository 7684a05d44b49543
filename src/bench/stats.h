// Summary statistics of latency samples, computed as NumPy computes them (vLLM's benchmark
// scripts use np.mean / np.median / np.std / np.percentile), so that figures printed by
// `pagellm bench serve` can be compared with `vllm bench serve` one to one.
#pragma once

#include <map>
#include <vector>

namespace pagellm::bench {

// The p-th percentile (p in [0, 100]) by linear interpolation between the two nearest ranks
// (NumPy's default "linear" method): rank = p / 100 * (n - 1). 0 for an empty sample, as vLLM
// reports 0 when there is nothing to measure.
double Percentile(std::vector<double> values, double p);
double Mean(const std::vector<double>& values);
double Median(const std::vector<double>& values);
// Population standard deviation (NumPy's default ddof = 0).
double StdDev(const std::vector<double>& values);

struct Summary {
  double mean = 0;
  double median = 0;
  double std = 0;
  std::map<double, double> percentiles;  // p -> value
};
Summary Summarize(const std::vector<double>& values, const std::vector<double>& percentiles);

}  // namespace pagellm::bench
