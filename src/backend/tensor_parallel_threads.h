// A tensor-parallel group inside one process, for callers that cannot start ranks under mpirun
// (the Python LLM): rank 0 is the caller's engine (EngineConfig::tensor_parallel_group =
// rank0()), ranks 1..N-1 run RunTensorParallelWorker on threads of their own, all over the
// thread communicator (dist/local_communicator.h) with the binary's 30 s bound on every
// collective. Each worker builds its own kernel thread pool of rank 0's size (TpInit::threads).
// A worker that fails ends the group at once (AbortLocalGroup): rank 0's waiting or next
// collective returns the worker's error, naming its rank, instead of waiting for the bound.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "dist/communicator.h"
#include "pagellm/status.h"

namespace pagellm {

class TensorParallelThreads {
 public:
  // A worker rank's loop: RunTensorParallelWorker (tests pass others, e.g. one that fails).
  using WorkerFn = std::function<Status(Communicator&)>;
  static constexpr std::chrono::seconds kDefaultTimeout{30};

  // Starts ranks 1..size-1 (size >= 2).
  explicit TensorParallelThreads(int size, std::chrono::milliseconds timeout = kDefaultTimeout,
                                 WorkerFn worker = nullptr);
  ~TensorParallelThreads();  // Stop()
  TensorParallelThreads(const TensorParallelThreads&) = delete;
  TensorParallelThreads& operator=(const TensorParallelThreads&) = delete;

  // Rank 0's communicator, for the engine (one thread at a time). It stays valid after Stop(),
  // until this object is destroyed, so an engine holding it may be destroyed later.
  Communicator* rank0() const { return comms_[0].get(); }
  int size() const { return static_cast<int>(comms_.size()); }
  // The first worker failure ("tensor-parallel rank R: ..."), or Ok while every worker runs or
  // has stopped on rank 0's word.
  Status failure() const;
  // Sends the workers the shut-down message (or, after a failure or when it cannot be
  // delivered, ends the group) and joins them; returns failure(). Idempotent. Call it from the
  // thread that used rank0(), once the engine no longer runs steps.
  Status Stop();

 private:
  void RecordFailure(int rank, const Status& s);

  std::vector<std::unique_ptr<Communicator>> comms_;
  std::vector<std::thread> workers_;
  mutable std::mutex mu_;
  Status failure_;  // guarded by mu_
  bool stopped_ = false;
};

}  // namespace pagellm
