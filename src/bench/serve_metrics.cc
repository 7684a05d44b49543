#include "bench/serve_metrics.h"

#include <cmath>

#include "fmt/format.h"

namespace pagellm::bench {

double RequestTpot(const RequestResult& r) {
  if (r.output_len <= 1) return 0;
  return (r.latency - r.ttft) / (r.output_len - 1);
}

StatusOr<GoodputSlos> ParseGoodput(const std::vector<std::string>& items) {
  GoodputSlos slos;
  for (const std::string& item : items) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos)
      return InvalidArgumentError(fmt::format(
          "--goodput takes NAME:MILLISECONDS items (ttft, tpot, e2el), got '{}'", item));
    const std::string name = item.substr(0, colon);
    const std::string value = item.substr(colon + 1);
    char* end = nullptr;
    const double ms = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(ms >= 0) || !std::isfinite(ms))
      return InvalidArgumentError(fmt::format("--goodput {}: bad milliseconds '{}'", name, value));
    std::optional<double>* slot = name == "ttft"   ? &slos.ttft_ms
                                  : name == "tpot" ? &slos.tpot_ms
                                  : name == "e2el" ? &slos.e2el_ms
                                                   : nullptr;
    if (slot == nullptr)
      return InvalidArgumentError(
          fmt::format("--goodput: unknown metric '{}' (ttft, tpot, e2el)", name));
    if (slot->has_value())
      return InvalidArgumentError(fmt::format("--goodput: {} given twice", name));
    *slot = ms;
  }
  return slos;
}

bool MeetsSlos(const RequestResult& r, const GoodputSlos& slos) {
  if (!r.success) return false;
  if (slos.ttft_ms && r.ttft * 1e3 > *slos.ttft_ms) return false;
  if (slos.tpot_ms && RequestTpot(r) * 1e3 > *slos.tpot_ms) return false;
  if (slos.e2el_ms && r.latency * 1e3 > *slos.e2el_ms) return false;
  return true;
}

BenchmarkMetrics ComputeMetrics(const std::vector<RequestResult>& results, double duration_s,
                                const GoodputSlos& slos, const std::vector<double>& percentiles) {
  BenchmarkMetrics m;
  m.duration = duration_s;
  std::vector<double> ttfts, tpots, itls, e2els;
  for (const RequestResult& r : results) {
    if (!r.success) {
      ++m.failed;
      continue;
    }
    ++m.completed;
    m.total_input += r.prompt_len;
    m.total_output += r.output_len;
    ttfts.push_back(r.ttft * 1e3);
    if (r.output_len > 1) tpots.push_back(RequestTpot(r) * 1e3);
    for (double gap : r.itl) itls.push_back(gap * 1e3);
    e2els.push_back(r.latency * 1e3);
    if (slos.any() && MeetsSlos(r, slos)) ++m.good_requests;
  }
  if (duration_s > 0) {
    m.request_throughput = m.completed / duration_s;
    m.request_goodput = m.good_requests / duration_s;
    m.output_throughput = static_cast<double>(m.total_output) / duration_s;
    m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / duration_s;
  }
  m.ttft_ms = Summarize(ttfts, percentiles);
  m.tpot_ms = Summarize(tpots, percentiles);
  m.itl_ms = Summarize(itls, percentiles);
  m.e2el_ms = Summarize(e2els, percentiles);
  return m;
}

std::string PercentileWord(double p) {
  if (p == std::floor(p)) return fmt::format("{}", static_cast<int64_t>(p));
  return fmt::format("{}", p);
}

namespace {

struct MetricInfo {
  const char* key;     // ttft
  const char* label;   // TTFT
  const char* header;  // Time to First Token
  const Summary BenchmarkMetrics::*summary;
};

constexpr MetricInfo kMetrics[] = {
    {"ttft", "TTFT", "Time to First Token", &BenchmarkMetrics::ttft_ms},
    {"tpot", "TPOT", "Time per Output Token (excl. 1st token)", &BenchmarkMetrics::tpot_ms},
    {"itl", "ITL", "Inter-token Latency", &BenchmarkMetrics::itl_ms},
    {"e2el", "E2EL", "End-to-end Latency", &BenchmarkMetrics::e2el_ms},
};

bool Selected(const ReportOptions& o, const char* key) {
  for (const std::string& k : o.metrics)
    if (k == key) return true;
  return false;
}

}  // namespace

std::string FormatReport(const BenchmarkMetrics& m, const ReportOptions& o) {
  std::string s;
  auto row = [&](std::string_view label, const std::string& value) {
    s += fmt::format("{:<40} {:<10}\n", label, value);
  };
  auto f2 = [](double v) { return fmt::format("{:.2f}", v); };
  s += fmt::format("{:=^50}\n", " " + o.title + " ");
  row("Successful requests:", fmt::format("{}", m.completed));
  row("Failed requests:", fmt::format("{}", m.failed));
  if (o.max_concurrency) row("Maximum request concurrency:", fmt::format("{}", *o.max_concurrency));
  row("Request rate configured (RPS):", std::isinf(o.request_rate) ? "inf" : f2(o.request_rate));
  row("Benchmark duration (s):", f2(m.duration));
  row("Total input tokens:", fmt::format("{}", m.total_input));
  row("Total generated tokens:", fmt::format("{}", m.total_output));
  row("Request throughput (req/s):", f2(m.request_throughput));
  if (o.goodput) row("Request goodput (req/s):", f2(m.request_goodput));
  row("Output token throughput (tok/s):", f2(m.output_throughput));
  row("Total Token throughput (tok/s):", f2(m.total_token_throughput));
  for (const MetricInfo& info : kMetrics) {
    if (!Selected(o, info.key)) continue;
    const Summary& sum = m.*info.summary;
    s += fmt::format("{:-^50}\n", info.header);
    row(fmt::format("Mean {} (ms):", info.label), f2(sum.mean));
    row(fmt::format("Median {} (ms):", info.label), f2(sum.median));
    for (double p : o.percentiles) {
      auto it = sum.percentiles.find(p);
      row(fmt::format("P{} {} (ms):", PercentileWord(p), info.label),
          f2(it == sum.percentiles.end() ? 0 : it->second));
    }
  }
  s += std::string(50, '=') + "\n";
  return s;
}

nlohmann::json MetricsJson(const BenchmarkMetrics& m, const ReportOptions& o) {
  nlohmann::json j = {
      {"duration", m.duration},
      {"completed", m.completed},
      {"failed", m.failed},
      {"total_input_tokens", m.total_input},
      {"total_output_tokens", m.total_output},
      {"request_throughput", m.request_throughput},
      {"output_throughput", m.output_throughput},
      {"total_token_throughput", m.total_token_throughput},
  };
  j["request_goodput"] = o.goodput ? nlohmann::json(m.request_goodput) : nlohmann::json();
  for (const MetricInfo& info : kMetrics) {
    const Summary& sum = m.*info.summary;
    j[fmt::format("mean_{}_ms", info.key)] = sum.mean;
    j[fmt::format("median_{}_ms", info.key)] = sum.median;
    j[fmt::format("std_{}_ms", info.key)] = sum.std;
    for (const auto& [p, v] : sum.percentiles)
      j[fmt::format("p{}_{}_ms", PercentileWord(p), info.key)] = v;
  }
  return j;
}

std::map<int, TurnSummary> SummarizeByTurn(const std::vector<RequestResult>& results) {
  std::map<int, TurnSummary> by_turn;
  for (const RequestResult& r : results) {
    if (!r.success || r.turn < 0) continue;
    TurnSummary& t = by_turn[r.turn];
    ++t.requests;
    t.mean_ttft_ms += r.ttft * 1e3;
    t.mean_prompt_len += r.prompt_len;
  }
  for (auto& [turn, t] : by_turn) {
    t.mean_ttft_ms /= t.requests;
    t.mean_prompt_len /= t.requests;
  }
  return by_turn;
}

}  // namespace pagellm::bench
