#include "metrics/metrics_registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "metrics/engine_metrics.h"
#include "metrics/request_tracker.h"

namespace pagellm {
namespace {

TEST(FormatPrometheusValue, MatchesPrometheusClient) {
  // prometheus_client's floatToGoString over Python's repr().
  EXPECT_EQ(FormatPrometheusValue(0), "0.0");
  EXPECT_EQ(FormatPrometheusValue(1), "1.0");
  EXPECT_EQ(FormatPrometheusValue(0.001), "0.001");
  EXPECT_EQ(FormatPrometheusValue(0.25), "0.25");
  EXPECT_EQ(FormatPrometheusValue(2560), "2560.0");
  EXPECT_EQ(FormatPrometheusValue(16384), "16384.0");
  EXPECT_EQ(FormatPrometheusValue(123456), "123456.0");
  EXPECT_EQ(FormatPrometheusValue(1234567), "1.234567e+06");
  EXPECT_EQ(FormatPrometheusValue(1000000), "1e+06");
  EXPECT_EQ(FormatPrometheusValue(1.5e-7), "1.5e-07");
  EXPECT_EQ(FormatPrometheusValue(0.0001), "0.0001");
  EXPECT_EQ(FormatPrometheusValue(-2.5), "-2.5");
  EXPECT_EQ(FormatPrometheusValue(1e16), "1e+16");
  EXPECT_EQ(FormatPrometheusValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatPrometheusValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatPrometheusValue(std::nan("")), "NaN");
}

TEST(Buckets125, AsVllmBuild125Buckets) {
  EXPECT_EQ(Buckets125(512), (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500}));
  EXPECT_EQ(Buckets125(100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  EXPECT_TRUE(Buckets125(0).empty());
}

TEST(MetricsRegistry, RendersTextFormat) {
  MetricsRegistry r;
  const MetricLabels labels = {{"model_name", "m"}, {"engine", "0"}};
  Counter& c = r.AddCounter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels);
  Gauge& g = r.AddGauge("vllm:num_requests_running", "Running.", labels);
  Histogram& h = r.AddHistogram("vllm:lat", "Latency.", labels, {0.5, 1.0});
  c.Inc(3);
  c.Inc(-1);  // ignored: counters only go up
  g.Set(2);
  h.Observe(0.5);  // le is inclusive
  h.Observe(0.7);
  h.Observe(9);
  EXPECT_EQ(r.Render(),
            "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n"
            "# TYPE vllm:prompt_tokens_total counter\n"
            "vllm:prompt_tokens_total{model_name=\"m\",engine=\"0\"} 3.0\n"
            "# HELP vllm:num_requests_running Running.\n"
            "# TYPE vllm:num_requests_running gauge\n"
            "vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 2.0\n"
            "# HELP vllm:lat Latency.\n"
            "# TYPE vllm:lat histogram\n"
            "vllm:lat_bucket{model_name=\"m\",engine=\"0\",le=\"0.5\"} 1.0\n"
            "vllm:lat_bucket{model_name=\"m\",engine=\"0\",le=\"1.0\"} 2.0\n"
            "vllm:lat_bucket{model_name=\"m\",engine=\"0\",le=\"+Inf\"} 3.0\n"
            "vllm:lat_count{model_name=\"m\",engine=\"0\"} 3.0\n"
            "vllm:lat_sum{model_name=\"m\",engine=\"0\"} 10.2\n");
}

TEST(MetricsRegistry, FamiliesShareHelpAndEscapeLabels) {
  MetricsRegistry r;
  r.AddCounter("x", "Help with \\ and\nnewline.", {{"reason", "stop"}}).Inc();
  r.AddCounter("x", "ignored", {{"reason", "a\"b\\c\nd"}});
  EXPECT_EQ(r.Render(),
            "# HELP x_total Help with \\\\ and\\nnewline.\n"
            "# TYPE x_total counter\n"
            "x_total{reason=\"stop\"} 1.0\n"
            "x_total{reason=\"a\\\"b\\\\c\\nd\"} 0.0\n");
}

TEST(MetricsRegistry, ConcurrentUpdatesAddUp) {
  MetricsRegistry r;
  Counter& c = r.AddCounter("c", "c", {});
  Histogram& h = r.AddHistogram("h", "h", {}, {1.0});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.Inc();
        h.Observe(0.5);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 40000);
  EXPECT_EQ(h.snapshot().count, 40000u);
}

// A request's outputs turn into the per-request histograms exactly once each.
TEST(RequestTracker, RecordsVllmRequestMetrics) {
  EngineMetricsConfig config;
  config.model_name = "m";
  config.max_model_len = 512;
  EngineMetrics metrics(config);
  using Clock = RequestTracker::Clock;
  const Clock::time_point t0 = Clock::now();
  RequestTracker tracker(&metrics, t0, t0 + std::chrono::milliseconds(1));
  tracker.set_params(1, 3);
  EngineOutput o;
  o.num_prompt_tokens = 5;
  o.first_scheduled_time = t0 + std::chrono::milliseconds(2);
  o.new_token_ids = {7};
  tracker.OnOutput(o, t0 + std::chrono::milliseconds(10));
  tracker.OnOutput(o, t0 + std::chrono::milliseconds(20));
  o.finished = true;
  o.finish_reason = FinishReason::kLength;
  tracker.OnOutput(o, t0 + std::chrono::milliseconds(40));
  const std::string text = metrics.Render(EngineStats{});
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("vllm:prompt_tokens_total{model_name=\"m\",engine=\"0\"} 5.0")) << text;
  EXPECT_TRUE(has("vllm:generation_tokens_total{model_name=\"m\",engine=\"0\"} 3.0"));
  EXPECT_TRUE(
      has("vllm:request_success_total{model_name=\"m\",engine=\"0\","
          "finished_reason=\"length\"} 1.0"));
  EXPECT_TRUE(has("vllm:time_to_first_token_seconds_count{model_name=\"m\",engine=\"0\"} 1.0"));
  EXPECT_TRUE(has("vllm:inter_token_latency_seconds_count{model_name=\"m\",engine=\"0\"} 2.0"));
  EXPECT_TRUE(has("vllm:request_decode_time_seconds_sum{model_name=\"m\",engine=\"0\"} 0.03"));
  EXPECT_TRUE(has("vllm:request_queue_time_seconds_sum{model_name=\"m\",engine=\"0\"} 0.001"));
  EXPECT_TRUE(has("vllm:request_prefill_time_seconds_sum{model_name=\"m\",engine=\"0\"} 0.008"));
  EXPECT_TRUE(
      has("vllm:request_time_per_output_token_seconds_sum{model_name=\"m\",engine=\"0\"} 0.015"));
  EXPECT_TRUE(has("vllm:request_params_max_tokens_sum{model_name=\"m\",engine=\"0\"} 3.0"));
}

}  // namespace
}  // namespace pagellm
