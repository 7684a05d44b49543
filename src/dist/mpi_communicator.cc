#include "dist/mpi_communicator.h"

#include <mpi.h>
#include <time.h>

#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace pagellm {
namespace {

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, len);
}

// Sleeps `ns` nanoseconds (the polling loop's back-off).
void Nap(long ns) {
  timespec t{0, ns};
  nanosleep(&t, nullptr);
}

}  // namespace

StatusOr<std::unique_ptr<MpiCommunicator>> MpiCommunicator::Create(
    std::chrono::milliseconds timeout) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return FailedPreconditionError("MPI is already initialised in this process");
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    return UnavailableError("MPI_Init_thread failed");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return UnimplementedError("this MPI library cannot be called from more than one thread");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(rank, size, timeout));
}

MpiCommunicator::~MpiCommunicator() {
  MPI_Finalize();
}

Status MpiCommunicator::Wait(void* request, const char* what, bool wait_forever) {
  MPI_Request* req = static_cast<MPI_Request*>(request);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t polls = 0;; ++polls) {
    int done = 0;
    const int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      const std::string message =
          fmt::format("tensor-parallel rank {}: {} failed: {}", rank_, what, MpiErrorText(rc));
      spdlog::error("{}; aborting every rank", message);
      MPI_Abort(MPI_COMM_WORLD, 1);
      return UnavailableError(message);
    }
    if (done) return Status::Ok();
    // Poll hot for the common short waits (one layer's compute on the slowest rank), then
    // sleep in growing naps up to 0.5 ms (a few per cent of a decode step's layer).
    if (polls < 2000) continue;
    Nap(polls < 4000 ? 20'000 : 500'000);
    if (wait_forever || (polls & 63) != 0) continue;
    if (std::chrono::steady_clock::now() - start > timeout_) {
      const std::string message = fmt::format(
          "tensor-parallel rank {}: {} got no answer from every rank within {} s (a rank died or "
          "hangs)",
          rank_, what, timeout_.count() / 1000.0);
      spdlog::error("{}; aborting every rank", message);
      MPI_Abort(MPI_COMM_WORLD, 1);
      return UnavailableError(message);
    }
  }
}

Status MpiCommunicator::AllReduceSum(float* x, int64_t n) {
  if (size_ == 1) return Status::Ok();
  if (n > INT32_MAX / size_) return InvalidArgumentError("AllReduceSum: too many floats");
  parts_.resize(static_cast<size_t>(n) * size_);
  MPI_Request req;
  MPI_Iallgather(x, static_cast<int>(n), MPI_FLOAT, parts_.data(), static_cast<int>(n), MPI_FLOAT,
                 MPI_COMM_WORLD, &req);
  RETURN_IF_ERROR(Wait(&req, "all-reduce", false));
  SumInRankOrder(parts_.data(), size_, n, x);
  return Status::Ok();
}

Status MpiCommunicator::Broadcast(std::vector<uint8_t>* bytes, bool wait_forever) {
  int64_t n = rank_ == 0 ? static_cast<int64_t>(bytes->size()) : 0;
  MPI_Request req;
  MPI_Ibcast(&n, 1, MPI_INT64_T, 0, MPI_COMM_WORLD, &req);
  RETURN_IF_ERROR(Wait(&req, "broadcast", wait_forever));
  if (n > INT32_MAX) return InvalidArgumentError("Broadcast: message over 2 GiB");
  if (rank_ != 0) bytes->resize(static_cast<size_t>(n));
  if (n == 0) return Status::Ok();
  MPI_Ibcast(bytes->data(), static_cast<int>(n), MPI_BYTE, 0, MPI_COMM_WORLD, &req);
  return Wait(&req, "broadcast", false);
}

Status MpiCommunicator::GatherToRoot(std::span<const uint8_t> mine,
                                     std::vector<std::vector<uint8_t>>* all) {
  if (mine.size() > INT32_MAX) return InvalidArgumentError("GatherToRoot: message over 2 GiB");
  const int count = static_cast<int>(mine.size());
  std::vector<int> counts(rank_ == 0 ? size_ : 0), offsets(counts.size());
  MPI_Request req;
  MPI_Igather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
  RETURN_IF_ERROR(Wait(&req, "gather", false));
  std::vector<uint8_t> flat;
  if (rank_ == 0) {
    int64_t total = 0;
    for (int r = 0; r < size_; ++r) {
      offsets[r] = static_cast<int>(total);
      total += counts[r];
    }
    if (total > INT32_MAX) return InvalidArgumentError("GatherToRoot: over 2 GiB in all");
    flat.resize(static_cast<size_t>(total));
  }
  MPI_Igatherv(mine.data(), count, MPI_BYTE, flat.data(), counts.data(), offsets.data(), MPI_BYTE,
               0, MPI_COMM_WORLD, &req);
  RETURN_IF_ERROR(Wait(&req, "gather", false));
  if (rank_ == 0) {
    all->resize(size_);
    for (int r = 0; r < size_; ++r)
      (*all)[r].assign(flat.begin() + offsets[r], flat.begin() + offsets[r] + counts[r]);
  }
  return Status::Ok();
}

Status MpiCommunicator::Barrier() {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  return Wait(&req, "barrier", false);
}

}  // namespace pagellm
