#include "engine/async_engine.h"

#include "spdlog/spdlog.h"

namespace pagellm {

AsyncEngine::AsyncEngine(std::unique_ptr<EngineCore> core, StepFn on_step)
    : core_(std::move(core)), on_step_(std::move(on_step)) {
  stats_ = core_->stats();
  loop_ = std::thread([this] { Loop(); });
}

AsyncEngine::~AsyncEngine() {
  Shutdown();
}

Status AsyncEngine::Submit(EngineRequest request, OutputFn on_output) {
  RETURN_IF_ERROR(core_->ValidateRequest(request));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return UnavailableError("the engine is shutting down");
    inbox_.emplace_back(std::move(request), std::move(on_output));
  }
  cv_.notify_one();
  return Status::Ok();
}

void AsyncEngine::Abort(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborts_.push_back(request_id);
  }
  cv_.notify_one();
}

void AsyncEngine::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !loop_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (loop_.joinable()) loop_.join();
}

bool AsyncEngine::ResetPrefixCache() {
  std::future<bool> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    prefix_cache_resets_.emplace_back();
    done = prefix_cache_resets_.back().get_future();
  }
  cv_.notify_one();
  return done.get();
}

EngineStats AsyncEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void AsyncEngine::Loop() {
  while (true) {
    std::deque<std::pair<EngineRequest, OutputFn>> inbox;
    std::vector<std::string> aborts;
    std::vector<std::promise<bool>> resets;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stopping_ || !inbox_.empty() || !aborts_.empty() || !prefix_cache_resets_.empty() ||
               core_->HasUnfinishedRequests();
      });
      inbox.swap(inbox_);
      aborts.swap(aborts_);
      resets.swap(prefix_cache_resets_);
      stopping = stopping_;
    }
    for (auto& [req, fn] : inbox) {
      const std::string id = req.request_id;
      Status st = callbacks_.contains(id)
                      ? InvalidArgumentError("duplicate request id '" + id + "'")
                      : core_->AddRequest(std::move(req));
      if (!st.ok()) {
        EngineOutput o;
        o.request_id = id;
        o.finished = true;
        o.finish_reason = FinishReason::kAbort;
        o.error = st.message();
        fn(std::move(o));
        continue;
      }
      callbacks_.emplace(id, std::move(fn));
    }
    for (const std::string& id : aborts) core_->Abort(id);
    for (std::promise<bool>& p : resets) p.set_value(core_->ResetPrefixCache());
    if (stopping) {
      for (const auto& [id, fn] : callbacks_) core_->Abort(id);
    }
    if (core_->HasUnfinishedRequests()) {
      auto outputs = core_->Step();
      if (!outputs.ok()) {
        // A failed forward pass is an engine bug or resource failure: finish every request
        // with the error rather than leaving clients hanging.
        spdlog::error("engine step failed: {}", outputs.status().ToString());
        for (const auto& [id, fn] : callbacks_) core_->Abort(id);
        continue;
      }
      if (on_step_ && core_->last_step_num_tokens() > 0) on_step_(core_->last_step_num_tokens());
      // Publish the step's stats before any client learns its request finished, so a client
      // that reads /metrics right after its response sees the counters of that step.
      {
        std::lock_guard<std::mutex> lock(mu_);
        stats_ = core_->stats();
      }
      for (EngineOutput& o : *outputs) {
        auto it = callbacks_.find(o.request_id);
        if (it == callbacks_.end()) continue;
        const bool finished = o.finished;
        it->second(std::move(o));
        if (finished) callbacks_.erase(it);
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_ = core_->stats();
    }
    if (stopping && !core_->HasUnfinishedRequests() && callbacks_.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (inbox_.empty()) return;
    }
  }
}

void OutputStream::Push(EngineOutput&& o) {
  // Notify under the lock: the reader may destroy the stream as soon as it has taken the final
  // output, so the loop thread must not touch cv_ after the reader can get the mutex
  // (ThreadSanitizer found the notify-after-unlock version signalling a destroyed condvar).
  std::lock_guard<std::mutex> lock(mu_);
  items_.push_back(std::move(o));
  cv_.notify_one();
}

std::optional<EngineOutput> OutputStream::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (done_ && items_.empty()) return std::nullopt;
  cv_.wait(lock, [&] { return !items_.empty(); });
  EngineOutput o = std::move(items_.front());
  items_.pop_front();
  if (o.finished) done_ = true;
  return o;
}

AsyncEngine::OutputFn OutputStream::Callback() {
  return [this](EngineOutput&& o) { Push(std::move(o)); };
}

}  // namespace pagellm
