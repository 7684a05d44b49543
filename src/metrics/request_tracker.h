// RequestTracker: follows one engine request's outputs and turns them into vLLM's per-request
// metrics (TTFT, inter-token latency, queue / prefill / decode / inference / e2e times, token
// counts, finish reason). It lives in the request's engine callback, so it sees every output
// (the final "abort" one included) even when the HTTP client is long gone.
#pragma once

#include <chrono>
#include <cstdint>

#include "engine/engine_output.h"
#include "engine/engine_stats.h"
#include "metrics/engine_metrics.h"

namespace pagellm {

class RequestTracker {
 public:
  using Clock = std::chrono::steady_clock;

  // arrival: when the HTTP request was received (TTFT and e2e start there, as in vLLM);
  // queued: when it was handed to the engine.
  RequestTracker(EngineMetrics* metrics, Clock::time_point arrival, Clock::time_point queued);

  // Parameters reported once per client request (on the n-fan-out child 0 only).
  void set_params(int n, int32_t max_tokens) {
    record_params_ = true;
    n_ = n;
    max_tokens_ = max_tokens;
  }

  // Called with every output of the request, in order, at the time it was produced.
  void OnOutput(const EngineOutput& output, Clock::time_point now);

 private:
  EngineMetrics* metrics_;
  Clock::time_point arrival_;
  Clock::time_point queued_;
  Clock::time_point first_token_{};
  Clock::time_point last_token_{};
  int32_t num_generation_tokens_ = 0;
  bool record_params_ = false;
  int n_ = 1;
  int32_t max_tokens_ = 0;
};

}  // namespace pagellm
