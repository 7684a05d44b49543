// EngineMetrics: the Prometheus metrics vLLM's server exports (names, types, help texts,
// buckets and labels as in vLLM V1's PrometheusStatLogger, plus the V0 swap-tier gauges and
// the deprecated vllm:gpu_cache_usage_perc alias that dashboards still query).
//
// Two kinds of sources feed it:
//   * per-request events (first token, each token, finish) from the server's RequestTracker,
//     on the engine loop thread;
//   * engine snapshots (EngineStats: running / waiting / swapped, KV usage, preemptions,
//     prefix-cache queries and hits), read when /metrics is scraped.
// Every method is thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_output.h"
#include "engine/engine_stats.h"
#include "metrics/metrics_registry.h"

namespace pagellm {

struct EngineMetricsConfig {
  std::string model_name;  // the served model name (label model_name)
  int32_t max_model_len = 0;
  // Labels of vllm:cache_config_info (block_size, cache_dtype, num_gpu_blocks, ...).
  MetricLabels cache_config;
  // k of speculative decoding; 0 = off (the vllm:spec_decode_* counters are then absent, as
  // vLLM registers them only with a speculative config).
  int32_t num_speculative_tokens = 0;
  // Ranks of a tensor-parallel engine; above 1 the pagellm:tensor_parallel_* counters exist.
  int32_t tensor_parallel_size = 1;
};

// What one engine request looked like when it finished (vLLM's FinishedRequestStats).
// Intervals are in seconds; the phase ones are absent when the request never reached them
// (e.g. aborted while waiting).
struct FinishedRequestStats {
  std::string finish_reason;  // "stop" | "length" | "abort"
  double e2e_latency = 0;
  int32_t num_prompt_tokens = 0;
  int32_t num_generation_tokens = 0;
  std::optional<double> queued_time;     // queued -> first scheduled
  std::optional<double> prefill_time;    // first scheduled -> first token
  std::optional<double> decode_time;     // first token -> last token
  std::optional<double> inference_time;  // first scheduled -> last token
  // Request parameters (recorded once per client request, not per n-fan-out child).
  bool record_params = false;
  int n = 1;
  int32_t max_tokens = 0;  // the effective output limit
};

class EngineMetrics {
 public:
  explicit EngineMetrics(const EngineMetricsConfig& config);
  EngineMetrics(const EngineMetrics&) = delete;
  EngineMetrics& operator=(const EngineMetrics&) = delete;

  void OnFirstToken(int32_t num_prompt_tokens, double time_to_first_token);
  void OnNewTokens(int32_t num_tokens);
  void OnInterTokenLatency(double seconds);
  void OnRequestFinished(const FinishedRequestStats& stats);
  void OnIteration(int32_t num_tokens);

  // Refreshes the gauges and the engine-side counters from a snapshot.
  void UpdateEngineStats(const EngineStats& stats);
  // UpdateEngineStats(stats), then the text exposition.
  std::string Render(const EngineStats& stats);

  // Totals, for the periodic log line.
  double prompt_tokens_total() const { return prompt_tokens_.value(); }
  double generation_tokens_total() const { return generation_tokens_.value(); }

 private:
  MetricsRegistry registry_;
  Gauge& running_;
  Gauge& waiting_;
  Gauge& swapped_;
  Gauge& kv_usage_;
  Gauge& gpu_cache_usage_;  // deprecated alias of kv_usage_
  Gauge& cpu_cache_usage_;
  Counter& prefix_queries_;
  Counter& prefix_hits_;
  Counter& preemptions_;
  Counter& prompt_tokens_;
  Counter& generation_tokens_;
  std::unordered_map<std::string, Counter*> success_;  // by finish reason
  Histogram& prompt_tokens_hist_;
  Histogram& generation_tokens_hist_;
  Histogram& iteration_tokens_;
  Histogram& max_generation_tokens_;
  Histogram& params_n_;
  Histogram& params_max_tokens_;
  Histogram& ttft_;
  Histogram& itl_;
  Histogram& tpot_;
  Histogram& e2e_;
  Histogram& queue_time_;
  Histogram& inference_time_;
  Histogram& prefill_time_;
  Histogram& decode_time_;

  // The engine's cumulative counters as last seen, so that counters advance by deltas.
  std::mutex stats_mu_;
  int64_t last_preemptions_ = 0;
  int64_t last_prefix_queries_ = 0;
  int64_t last_prefix_hits_ = 0;
  // Structured outputs.
  Counter* grammar_masks_ = nullptr;
  Counter* grammar_mask_seconds_ = nullptr;
  Counter* grammar_cache_hits_ = nullptr;
  Counter* grammar_cache_misses_ = nullptr;
  Counter* grammar_compile_seconds_ = nullptr;
  int64_t last_grammar_masks_ = 0;
  int64_t last_grammar_cache_hits_ = 0;
  int64_t last_grammar_cache_misses_ = 0;
  double last_grammar_mask_seconds_ = 0.0;
  double last_grammar_compile_seconds_ = 0.0;
  // Tensor parallelism (null on one rank): rank 0's forward steps, their time and, of it, the
  // time inside collectives and in all-reduces.
  Counter* tp_steps_ = nullptr;
  Counter* tp_forward_seconds_ = nullptr;
  Counter* tp_comm_seconds_ = nullptr;
  Counter* tp_all_reduces_ = nullptr;
  Counter* tp_all_reduce_seconds_ = nullptr;
  int64_t last_tp_steps_ = 0;
  int64_t last_tp_all_reduces_ = 0;
  double last_tp_forward_seconds_ = 0.0;
  double last_tp_comm_seconds_ = 0.0;
  double last_tp_all_reduce_seconds_ = 0.0;
  // Speculative decoding (null / empty when off).
  Counter* spec_drafts_ = nullptr;
  Counter* spec_draft_tokens_ = nullptr;
  Counter* spec_accepted_tokens_ = nullptr;
  std::vector<Counter*> spec_accepted_per_pos_;
  SpecDecodeStats last_spec_;
};

}  // namespace pagellm
