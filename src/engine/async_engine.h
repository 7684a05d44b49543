// AsyncEngine: runs an EngineCore on one loop thread that owns all mutable engine state, and
// offers a thread-safe client interface (submit, stream, abort) to any number of threads.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/engine_core.h"

namespace pagellm {

class AsyncEngine {
 public:
  // Called on the loop thread with each step's output for the request; must not block.
  using OutputFn = std::function<void(EngineOutput&&)>;
  // Called on the loop thread after every step that ran a batch, with the number of tokens
  // it computed (the server's vllm:iteration_tokens_total); must not block.
  using StepFn = std::function<void(int32_t num_tokens)>;

  explicit AsyncEngine(std::unique_ptr<EngineCore> core, StepFn on_step = nullptr);
  ~AsyncEngine();  // Shutdown()

  // Validates (InvalidArgument for a bad request, Unavailable after shutdown) and queues.
  Status Submit(EngineRequest request, OutputFn on_output);
  // Aborts a queued or running request; its blocks are freed before the next step runs and its
  // final output has finish_reason "abort". Unknown ids are ignored.
  void Abort(const std::string& request_id);
  // Stops accepting requests, aborts everything in flight (each gets its final output), and
  // joins the loop thread. Idempotent.
  void Shutdown();
  // Drops every cached (unreferenced) prefix block, on the loop thread between steps. Returns
  // false when blocks are still in use (vLLM's reset_prefix_cache contract) or after shutdown.
  bool ResetPrefixCache();

  // Snapshot as of the last step (safe from any thread).
  EngineStats stats() const;
  // Immutable after construction: safe from any thread.
  const EngineCore& core() const { return *core_; }

 private:
  void Loop();

  std::unique_ptr<EngineCore> core_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<EngineRequest, OutputFn>> inbox_;
  std::vector<std::string> aborts_;
  std::vector<std::promise<bool>> prefix_cache_resets_;
  bool stopping_ = false;
  EngineStats stats_;
  StepFn on_step_;
  std::thread loop_;
  // Loop-thread only.
  std::unordered_map<std::string, OutputFn> callbacks_;
};

// A blocking queue of one request's outputs, for callers that want to pull rather than be
// called back (the HTTP handlers, the tests).
class OutputStream {
 public:
  void Push(EngineOutput&& o);
  // Blocks until an output is available; nullopt after the final one has been taken.
  std::optional<EngineOutput> Next();
  AsyncEngine::OutputFn Callback();  // pushes into this stream; keep the stream alive

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<EngineOutput> items_;
  bool done_ = false;
};

}  // namespace pagellm
