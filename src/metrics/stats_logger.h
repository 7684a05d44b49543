// StatsLogger: vLLM's periodic engine log line, every few seconds while there is traffic:
//   Engine 000: Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 80.5
//   tokens/s, Running: 4 reqs, Waiting: 0 reqs, Swapped: 0 reqs, GPU KV cache usage: 3.1%,
//   Prefix cache hit rate: 42.0%
// and, under tensor parallelism, rank 0's time inside the group's collectives over the
// interval's forward steps (TpCommText):
//   ..., Prefix cache hit rate: 42.0%, TP comm: 1.2 ms/step (8% of forward)
// Idle intervals (no tokens now or in the previous interval) are logged at debug level only.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "engine/engine_output.h"
#include "engine/engine_stats.h"
#include "metrics/engine_metrics.h"

namespace pagellm {

// ", TP comm: 1.2 ms/step (8% of forward)" for the forward steps between two snapshots of a
// tensor-parallel engine; empty on one rank or when no step ran.
std::string TpCommText(const EngineStats& now, const EngineStats& before);

class StatsLogger {
 public:
  using StatsFn = std::function<EngineStats()>;

  StatsLogger(StatsFn stats, const EngineMetrics* metrics, std::chrono::milliseconds interval);
  ~StatsLogger();  // Stop()
  StatsLogger(const StatsLogger&) = delete;
  StatsLogger& operator=(const StatsLogger&) = delete;

  void Start();
  void Stop();  // idempotent; wakes the thread at once

 private:
  void Run();
  void LogOnce(double elapsed_s);

  StatsFn stats_;
  const EngineMetrics* metrics_;
  std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
  // Run-thread only.
  double last_prompt_tokens_ = 0;
  double last_generation_tokens_ = 0;
  int64_t last_queries_ = 0;
  int64_t last_hits_ = 0;
  bool last_was_idle_ = true;
  SpecDecodeStats last_spec_;  // speculative-decoding totals at the previous line
  EngineStats last_stats_;     // the snapshot of the previous line (tensor-parallel times)
};

}  // namespace pagellm
