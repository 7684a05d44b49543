#include "metrics/request_tracker.h"

namespace pagellm {
namespace {

double Seconds(RequestTracker::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

RequestTracker::RequestTracker(EngineMetrics* metrics, Clock::time_point arrival,
                               Clock::time_point queued)
    : metrics_(metrics), arrival_(arrival), queued_(queued) {}

void RequestTracker::OnOutput(const EngineOutput& o, Clock::time_point now) {
  if (metrics_ == nullptr) return;
  const int32_t new_tokens = static_cast<int32_t>(o.new_token_ids.size());
  if (new_tokens > 0) {
    if (num_generation_tokens_ == 0) {
      first_token_ = now;
      metrics_->OnFirstToken(o.num_prompt_tokens, Seconds(now - arrival_));
    } else {
      metrics_->OnInterTokenLatency(Seconds(now - last_token_));
    }
    last_token_ = now;
    num_generation_tokens_ += new_tokens;
    metrics_->OnNewTokens(new_tokens);
  }
  if (!o.finished) return;

  FinishedRequestStats s;
  s.finish_reason = FinishReasonName(o.finish_reason);
  s.e2e_latency = Seconds(now - arrival_);
  s.num_prompt_tokens = o.num_prompt_tokens;
  s.num_generation_tokens = num_generation_tokens_;
  const bool scheduled = o.first_scheduled_time != Clock::time_point{};
  if (scheduled) s.queued_time = Seconds(o.first_scheduled_time - queued_);
  if (scheduled && num_generation_tokens_ > 0) {
    s.prefill_time = Seconds(first_token_ - o.first_scheduled_time);
    s.decode_time = Seconds(last_token_ - first_token_);
    s.inference_time = Seconds(last_token_ - o.first_scheduled_time);
  }
  s.record_params = record_params_;
  s.n = n_;
  s.max_tokens = max_tokens_;
  metrics_->OnRequestFinished(s);
}

}  // namespace pagellm
