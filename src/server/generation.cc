#include "server/generation.h"

#include <algorithm>

#include "engine/async_engine.h"
#include "metrics/request_tracker.h"
#include "sample/stop_checker.h"

namespace pagellm {

StatusOr<std::unique_ptr<Generation>> Generation::Start(ServingContext& ctx,
                                                        std::vector<EngineRequest> requests, int n,
                                                        Clock::time_point arrival) {
  auto channel = std::make_shared<Channel>();
  channel->finished.assign(requests.size(), false);
  std::unique_ptr<Generation> gen(new Generation(ctx, channel));
  const int count = static_cast<int>(requests.size());
  if (!ctx.TryReserveQueued(count)) {
    return UnavailableError(
        "The server is at its limit of queued requests (--max-queued-requests); retry later.");
  }
  // Slots of requests never submitted are released here; submitted ones release theirs with
  // their first output.
  int unsubmitted = count;
  for (int i = 0; i < count; ++i) {
    EngineRequest& r = requests[i];
    RequestTracker tracker(&ctx.metrics(), arrival, Clock::now());
    if (n > 0 && i % n == 0) {
      const int32_t prompt_len = static_cast<int32_t>(r.prompt_token_ids.size());
      tracker.set_params(n, StopChecker::OutputLimit(r.params, prompt_len, ctx.max_model_len()));
    }
    ServingContext* c = &ctx;
    bool started = false;
    auto on_output = [channel, tracker, started, c, i](EngineOutput&& o) mutable {
      const auto now = Clock::now();
      tracker.OnOutput(o, now);
      if (!started) {
        started = true;
        c->ReleaseQueued(1);
      }
      {
        std::lock_guard<std::mutex> lock(channel->mu);
        if (o.finished) {
          channel->finished[i] = true;
          ++channel->num_finished;
        }
        channel->items.push_back(GenerationItem{i, std::move(o)});
      }
      channel->cv.notify_all();
    };
    const std::string id = r.request_id;
    Status st = ctx.engine().Submit(std::move(r), std::move(on_output));
    if (!st.ok()) {
      ctx.ReleaseQueued(unsubmitted);
      gen->AbortAll();
      return st;
    }
    --unsubmitted;
    gen->ids_.push_back(id);
  }
  return gen;
}

void ChoiceResult::Add(const EngineOutput& o) {
  text += o.new_text;
  token_ids.insert(token_ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
  logprobs.insert(logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
  if (!o.new_token_ids.empty()) num_cached_tokens = o.num_cached_tokens;
  if (!o.prompt_logprobs.empty()) prompt_logprobs = o.prompt_logprobs;
  if (!o.error.empty()) error = o.error;
  if (o.finished) {
    finished = true;
    finish_reason = FinishReasonName(o.finish_reason);
    stop_reason = o.stop_reason;
  }
}

Generation::~Generation() {
  AbortAll();
  ctx_.AddLoad(-1);
}

std::vector<ChoiceResult> Generation::Collect() {
  std::vector<ChoiceResult> results(ids_.size());
  GenerationItem item;
  while (Next(&item) == Wait::kItem) results[item.index].Add(item.output);
  return results;
}

Generation::Wait Generation::Next(GenerationItem* item, std::optional<Clock::duration> timeout) {
  std::unique_lock<std::mutex> lock(channel_->mu);
  const int total = static_cast<int>(ids_.size());
  auto ready = [&] { return !channel_->items.empty() || channel_->num_taken_finished >= total; };
  if (timeout) {
    if (!channel_->cv.wait_for(lock, *timeout, ready)) return Wait::kTimeout;
  } else {
    channel_->cv.wait(lock, ready);
  }
  if (channel_->items.empty()) return Wait::kDone;
  *item = std::move(channel_->items.front());
  channel_->items.pop_front();
  if (item->output.finished) ++channel_->num_taken_finished;
  return Wait::kItem;
}

void Generation::AbortAll() {
  if (aborted_) return;
  aborted_ = true;
  std::vector<std::string> unfinished;
  {
    std::lock_guard<std::mutex> lock(channel_->mu);
    for (size_t i = 0; i < ids_.size(); ++i)
      if (!channel_->finished[i]) unfinished.push_back(ids_[i]);
  }
  for (const std::string& id : unfinished) ctx_.engine().Abort(id);
}

}  // namespace pagellm
