// Per-request measurements of `bench serve` and the summary `vllm bench serve` reports
// (BenchmarkMetrics), with the same definitions:
//   TTFT = arrival of the first streamed chunk carrying text - send time;
//   ITL  = every gap between consecutive text-carrying chunks;
//   E2EL = arrival of the last text-carrying chunk - send time;
//   TPOT = (E2EL - TTFT) / (output_tokens - 1), for requests with more than one output token;
//   goodput = requests meeting every SLO given (ttft, tpot, e2el in ms) / benchmark duration.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "nlohmann/json.hpp"
#include "pagellm/status.h"

namespace pagellm::bench {

struct RequestResult {
  bool success = false;
  std::string error;
  int prompt_len = 0;       // tokens: usage.prompt_tokens, else the length of what was sent
  int output_len = 0;       // tokens: usage.completion_tokens, else the number of text chunks
  double ttft = 0;          // seconds
  double latency = 0;       // seconds (E2EL)
  std::vector<double> itl;  // seconds
  double start = 0;         // seconds after the benchmark started
  int conversation = -1;    // multi-turn: conversation and turn index
  int turn = -1;
  std::string generated_text;
};

// Seconds per output token after the first; 0 when there is at most one output token.
double RequestTpot(const RequestResult& r);

struct GoodputSlos {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
};
// Parses "ttft:500" "tpot:50" "e2el:2000" (milliseconds, each at most once).
StatusOr<GoodputSlos> ParseGoodput(const std::vector<std::string>& items);
bool MeetsSlos(const RequestResult& r, const GoodputSlos& slos);

struct BenchmarkMetrics {
  int completed = 0;
  int failed = 0;
  int64_t total_input = 0;
  int64_t total_output = 0;
  double duration = 0;            // seconds
  double request_throughput = 0;  // req/s
  double request_goodput = 0;     // req/s (0 unless SLOs were given)
  int good_requests = 0;
  double output_throughput = 0;       // tok/s
  double total_token_throughput = 0;  // tok/s
  // Milliseconds.
  Summary ttft_ms, tpot_ms, itl_ms, e2el_ms;
};

BenchmarkMetrics ComputeMetrics(const std::vector<RequestResult>& results, double duration_s,
                                const GoodputSlos& slos, const std::vector<double>& percentiles);

struct ReportOptions {
  std::string title = "Serving Benchmark Result";
  std::optional<int> max_concurrency;
  double request_rate = 0;  // requests/s; +inf = all at once
  bool goodput = false;
  std::vector<std::string> metrics = {"ttft", "tpot", "itl", "e2el"};
  std::vector<double> percentiles = {99};
};

// The text block `vllm bench serve` prints ("{:<40} {:<10}" rows, 50-column rules).
std::string FormatReport(const BenchmarkMetrics& m, const ReportOptions& o);
// Keys as in vLLM's result JSON: completed, duration, request_throughput, mean_ttft_ms,
// median_ttft_ms, std_ttft_ms, p99_ttft_ms, ... (per-request lists are added by the caller).
nlohmann::json MetricsJson(const BenchmarkMetrics& m, const ReportOptions& o);

// "99" for 99.0, "99.9" for 99.9 (vLLM's percentile key spelling).
std::string PercentileWord(double p);

// Multi-turn: mean TTFT (ms) and mean prompt length of successful requests, by turn index.
struct TurnSummary {
  int requests = 0;
  double mean_ttft_ms = 0;
  double mean_prompt_len = 0;
};
std::map<int, TurnSummary> SummarizeByTurn(const std::vector<RequestResult>& results);

}  // namespace pagellm::bench
