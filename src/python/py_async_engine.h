// The engine behind pagellm.AsyncLLM: engine/async_engine.h's loop thread, with each step's
// outputs queued here and a pipe written when the queue becomes non-empty, so that an asyncio
// event loop can wait on the pipe (loop.add_reader) without a thread per request and without
// the engine thread ever taking the GIL.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/tensor_parallel_threads.h"
#include "engine/async_engine.h"
#include "pybind11/pybind11.h"

namespace pagellm::python {

class PyAsyncEngine {
 public:
  // With tensor_parallel_size N > 1 the ranks run as threads of this process, as PyLLM's.
  explicit PyAsyncEngine(const pybind11::dict& engine_args);
  ~PyAsyncEngine();  // Shutdown(), closes the pipe

  // Queues one engine request (n = 1). ValueError for a request the engine rejects;
  // RuntimeError once a tensor-parallel worker has failed (its steps then fail: the requests
  // in flight finish aborted).
  void AddRequest(const std::string& request_id, const std::vector<int32_t>& prompt_token_ids,
                  const pybind11::handle& params, int priority);
  void Abort(const std::string& request_id);
  // The outputs queued since the last call, as EngineOutputToPython tuples, oldest first;
  // drains the pipe.
  pybind11::list TakeOutputs();
  // Read end of the notification pipe (non-blocking).
  int notify_fd() const { return pipe_[0]; }
  // Stops the engine loop (aborting what is in flight), then the tensor-parallel workers.
  void Shutdown();

  pybind11::list Tokenize(const std::string& text) const;
  pybind11::dict Stats() const;
  pybind11::dict Info() const;
  const EngineCore& core() const { return engine_->core(); }

 private:
  // Declared before engine_: the workers' group outlives the engine that holds its rank 0.
  std::unique_ptr<TensorParallelThreads> tp_;
  std::unique_ptr<AsyncEngine> engine_;
  int pipe_[2] = {-1, -1};
  std::mutex mu_;
  std::deque<EngineOutput> queue_;                                   // guarded by mu_
  std::unordered_map<std::string, std::vector<std::string>> stops_;  // guarded by mu_
};

}  // namespace pagellm::python
