#include "metrics/stats_logger.h"

#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace pagellm {

std::string TpCommText(const EngineStats& now, const EngineStats& before) {
  const int64_t steps = now.tp_forward_steps - before.tp_forward_steps;
  if (now.tensor_parallel_size <= 1 || steps <= 0) return {};
  const double comm = now.tp_comm_seconds - before.tp_comm_seconds;
  const double forward = now.tp_forward_seconds - before.tp_forward_seconds;
  return fmt::format(", TP comm: {:.2f} ms/step ({:.0f}% of forward)", 1e3 * comm / steps,
                     forward > 0 ? 100.0 * comm / forward : 0.0);
}

StatsLogger::StatsLogger(StatsFn stats, const EngineMetrics* metrics,
                         std::chrono::milliseconds interval)
    : stats_(std::move(stats)), metrics_(metrics), interval_(interval) {}

StatsLogger::~StatsLogger() {
  Stop();
}

void StatsLogger::Start() {
  last_prompt_tokens_ = metrics_->prompt_tokens_total();
  last_generation_tokens_ = metrics_->generation_tokens_total();
  const EngineStats s = stats_();
  last_queries_ = s.prefix_cache_queries;
  last_hits_ = s.prefix_cache_hits;
  last_spec_ = s.spec_decode;
  last_stats_ = s;
  thread_ = std::thread([this] { Run(); });
}

void StatsLogger::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StatsLogger::Run() {
  auto last = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stopping_; })) {
    const auto now = std::chrono::steady_clock::now();
    lock.unlock();
    LogOnce(std::chrono::duration<double>(now - last).count());
    lock.lock();
    last = now;
  }
}

void StatsLogger::LogOnce(double elapsed_s) {
  const EngineStats s = stats_();
  const double prompt = metrics_->prompt_tokens_total();
  const double generation = metrics_->generation_tokens_total();
  const double prompt_tps = elapsed_s > 0 ? (prompt - last_prompt_tokens_) / elapsed_s : 0;
  const double gen_tps = elapsed_s > 0 ? (generation - last_generation_tokens_) / elapsed_s : 0;
  // Hit rate over this interval's lookups (the cumulative rate hides recent behaviour).
  const int64_t queries = s.prefix_cache_queries - last_queries_;
  const int64_t hits = s.prefix_cache_hits - last_hits_;
  const double hit_rate = queries > 0 ? 100.0 * static_cast<double>(hits) / queries : 0.0;
  last_prompt_tokens_ = prompt;
  last_generation_tokens_ = generation;
  last_queries_ = s.prefix_cache_queries;
  last_hits_ = s.prefix_cache_hits;

  const bool idle = prompt_tps == 0 && gen_tps == 0;
  const auto level = idle && last_was_idle_ ? spdlog::level::debug : spdlog::level::info;
  last_was_idle_ = idle;
  const std::string tp_comm = TpCommText(s, last_stats_);
  last_stats_ = s;
  spdlog::log(level,
              "Engine 000: Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: "
              "{:.1f} tokens/s, Running: {} reqs, Waiting: {} reqs, Swapped: {} reqs, GPU KV "
              "cache usage: {:.1f}%, Prefix cache hit rate: {:.1f}%{}",
              prompt_tps, gen_tps, s.num_running, s.num_waiting, s.num_swapped, 100.0 * s.kv_usage,
              hit_rate, tp_comm);
  if (s.num_speculative_tokens > 0) {
    // Acceptance rate and mean acceptance length over this interval's verifications.
    const SpecDecodeStats spec = s.spec_decode.Since(last_spec_);
    last_spec_ = s.spec_decode;
    if (spec.num_drafts > 0) spdlog::log(level, "{}", spec.LogLine(elapsed_s));
  }
}

}  // namespace pagellm
