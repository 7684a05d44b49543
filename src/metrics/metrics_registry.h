// MetricsRegistry: Prometheus counters, gauges and histograms with labels, rendered in the
// text exposition format (version 0.0.4) exactly as Python's prometheus_client writes it,
// which is what vLLM serves: counters get a `_total` suffix, histograms `_bucket{le=...}`,
// `_count` and `_sum`, and numbers are printed like Python floats ("1.0", "0.25", "+Inf").
//
// Series are registered up front (so that every series appears, at 0, from the first scrape)
// and updated lock-free (counters, gauges) or under a per-series mutex (histograms) from any
// thread. The references returned by Add* stay valid for the registry's lifetime.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace pagellm {

// Label names and values, in exposition order.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  // Adds `v` (>= 0; negative increments are ignored, as counters only go up).
  void Inc(double v = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `bounds`: the finite upper bounds, ascending; +Inf is implicit.
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last = +Inf
  uint64_t count_ = 0;
  double sum_ = 0;
};

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // `name` without the `_total` suffix (prometheus_client's convention; vLLM declares
  // "vllm:prompt_tokens" and serves "vllm:prompt_tokens_total"). Adding a second series to
  // a family (same name, other label values) keeps the family's help text and type.
  Counter& AddCounter(const std::string& name, const std::string& help, const MetricLabels& labels);
  Gauge& AddGauge(const std::string& name, const std::string& help, const MetricLabels& labels);
  Histogram& AddHistogram(const std::string& name, const std::string& help,
                          const MetricLabels& labels, std::vector<double> bounds);

  // The whole registry in the Prometheus text format, families in registration order.
  std::string Render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series {
    MetricLabels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  struct Family {
    std::string name;
    std::string help;
    Type type;
    std::vector<std::unique_ptr<Series>> series;
  };
  Series& AddSeries(const std::string& name, const std::string& help, Type type,
                    const MetricLabels& labels);

  mutable std::mutex mu_;  // guards the family / series lists, not the values
  std::vector<std::unique_ptr<Family>> families_;
  std::map<std::string, Family*> by_name_;
};

// Python's repr() of a float with prometheus_client's Go-style adjustments: "1.0", "0.001",
// "2560.0", "1.5e-07", "1.234567e+06", "+Inf", "NaN".
std::string FormatPrometheusValue(double v);

// vLLM's build_1_2_5_buckets(max_value): 1, 2, 5, 10, 20, 50, ... up to max_value.
std::vector<double> Buckets125(double max_value);

}  // namespace pagellm
