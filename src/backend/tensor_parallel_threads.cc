#include "backend/tensor_parallel_threads.h"

#include <exception>

#include "backend/tensor_parallel_backend.h"
#include "dist/local_communicator.h"
#include "fmt/format.h"
#include "pagellm/check.h"
#include "spdlog/spdlog.h"

namespace pagellm {

TensorParallelThreads::TensorParallelThreads(int size, std::chrono::milliseconds timeout,
                                             WorkerFn worker)
    : comms_(CreateLocalGroup(size, timeout)) {
  CHECK_GE(size, 2);
  if (!worker) worker = RunTensorParallelWorker;
  for (int r = 1; r < size; ++r) {
    workers_.emplace_back([this, r, worker] {
      Status s;
      try {
        s = worker(*comms_[r]);
      } catch (const std::exception& e) {
        s = InternalError(e.what());
      }
      if (!s.ok()) RecordFailure(r, s);
    });
  }
}

TensorParallelThreads::~TensorParallelThreads() {
  (void)Stop();
}

void TensorParallelThreads::RecordFailure(int rank, const Status& s) {
  Status named(s.code(), fmt::format("tensor-parallel rank {}: {}", rank, s.message()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return;  // a consequence of the first failure (the group has ended)
    failure_ = named;
  }
  spdlog::error("{}", named.message());
  AbortLocalGroup(*comms_[rank], named);
}

Status TensorParallelThreads::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

Status TensorParallelThreads::Stop() {
  if (!stopped_) {
    stopped_ = true;
    // A worker that failed has ended the group already (every collective returns at once).
    if (!failure().ok() || !ShutDownTensorParallelWorkers(*comms_[0]).ok())
      AbortLocalGroup(*comms_[0], UnavailableError("tensor-parallel group shut down"));
    for (std::thread& t : workers_) t.join();
  }
  return failure();
}

}  // namespace pagellm
