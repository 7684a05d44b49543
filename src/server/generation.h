// Generation: the engine requests behind one API request (n samples of each prompt), with
// their outputs merged into one queue that the HTTP thread drains, in arrival order.
//
// Lifetime: the engine calls back on its loop thread, possibly after the HTTP side has given
// up (client gone, server stopping), so the callbacks share ownership of the queue rather
// than pointing into the Generation. Destroying a Generation aborts whatever is unfinished,
// which frees its KV blocks before the engine's next step.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "server/serving_context.h"

namespace pagellm {

struct GenerationItem {
  int index = 0;  // position of the engine request in Start()'s list (the choice index)
  EngineOutput output;
};

// Everything one engine request produced, accumulated.
struct ChoiceResult {
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprobEntry> logprobs;
  std::vector<std::optional<TokenLogprobEntry>> prompt_logprobs;  // with prompt_logprobs / echo
  bool finished = false;
  std::string finish_reason;
  std::string stop_reason;
  int32_t num_cached_tokens = 0;
  std::string error;  // the engine refused the request after accepting it

  void Add(const EngineOutput& o);
};

class Generation {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Wait { kItem, kTimeout, kDone };

  // Submits every request; request i becomes choice i. `n` is the client's n (metrics record
  // the request parameters once per prompt, on choices 0, n, 2n, ...). If any submit fails
  // (validation, queue full, shutting down), those already submitted are aborted and the
  // error returned: InvalidArgument (400) or Unavailable (503).
  static StatusOr<std::unique_ptr<Generation>> Start(ServingContext& ctx,
                                                     std::vector<EngineRequest> requests, int n,
                                                     Clock::time_point arrival);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // The next output of any request. Without a timeout it blocks until one comes or all are
  // done.
  Wait Next(GenerationItem* item, std::optional<Clock::duration> timeout = std::nullopt);
  // Blocks until every request has finished and returns their results, by choice index.
  std::vector<ChoiceResult> Collect();
  // Aborts every request that has not finished (idempotent).
  void AbortAll();
  int size() const { return static_cast<int>(ids_.size()); }
  const std::string& engine_request_id(int index) const { return ids_[index]; }

 private:
  struct Channel {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<GenerationItem> items;
    std::vector<bool> finished;  // per request, set when its final output is queued
    int num_finished = 0;
    int num_taken_finished = 0;  // final outputs handed to the reader
  };

  // Counts in the server load (GET /load) for its lifetime.
  Generation(ServingContext& ctx, std::shared_ptr<Channel> channel)
      : ctx_(ctx), channel_(std::move(channel)) {
    ctx_.AddLoad(1);
  }

  ServingContext& ctx_;
  std::shared_ptr<Channel> channel_;
  std::vector<std::string> ids_;
  bool aborted_ = false;
};

}  // namespace pagellm
