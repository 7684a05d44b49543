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

struct MpiCommunicator::Comm {
  MPI_Comm comm = MPI_COMM_WORLD;
};

MpiCommunicator::MpiCommunicator(std::unique_ptr<Comm> comm, int rank, int size, int world_rank,
                                 std::chrono::milliseconds timeout)
    : comm_(std::move(comm)),
      rank_(rank),
      size_(size),
      world_rank_(world_rank),
      timeout_(timeout) {}

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
  return std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(std::make_unique<Comm>(), rank, size, rank, timeout));
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_->comm == MPI_COMM_WORLD) {
    MPI_Finalize();
  } else {
    MPI_Comm_free(&comm_->comm);
  }
}

Status MpiCommunicator::Wait(void* request, const char* what, bool wait_forever, int patience) {
  MPI_Request* req = static_cast<MPI_Request*>(request);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t polls = 0;; ++polls) {
    int done = 0;
    const int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      const std::string message = fmt::format("tensor-parallel rank {}: {} failed: {}", world_rank_,
                                              what, MpiErrorText(rc));
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
    if (std::chrono::steady_clock::now() - start > timeout_ * patience) {
      const std::string message = fmt::format(
          "tensor-parallel rank {}: {} got no answer from every rank within {} s (a rank died or "
          "hangs)",
          world_rank_, what, timeout_.count() * patience / 1000.0);
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
                 comm_->comm, &req);
  RETURN_IF_ERROR(Wait(&req, "all-reduce", false));
  SumInRankOrder(parts_.data(), size_, n, x);
  return Status::Ok();
}

Status MpiCommunicator::Broadcast(std::vector<uint8_t>* bytes, bool wait_forever) {
  int64_t n = rank_ == 0 ? static_cast<int64_t>(bytes->size()) : 0;
  MPI_Request req;
  MPI_Ibcast(&n, 1, MPI_INT64_T, 0, comm_->comm, &req);
  RETURN_IF_ERROR(Wait(&req, "broadcast", wait_forever));
  if (n > INT32_MAX) return InvalidArgumentError("Broadcast: message over 2 GiB");
  if (rank_ != 0) bytes->resize(static_cast<size_t>(n));
  if (n == 0) return Status::Ok();
  MPI_Ibcast(bytes->data(), static_cast<int>(n), MPI_BYTE, 0, comm_->comm, &req);
  return Wait(&req, "broadcast", false);
}

Status MpiCommunicator::GatherToRoot(std::span<const uint8_t> mine,
                                     std::vector<std::vector<uint8_t>>* all) {
  if (mine.size() > INT32_MAX) return InvalidArgumentError("GatherToRoot: message over 2 GiB");
  const int count = static_cast<int>(mine.size());
  std::vector<int> counts(rank_ == 0 ? size_ : 0), offsets(counts.size());
  MPI_Request req;
  MPI_Igather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm_->comm, &req);
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
               0, comm_->comm, &req);
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
  MPI_Ibarrier(comm_->comm, &req);
  return Wait(&req, "barrier", false);
}

Status MpiCommunicator::Send(int to, std::span<const uint8_t> bytes, int patience) {
  if (to < 0 || to >= size_ || to == rank_)
    return InvalidArgumentError(fmt::format("Send from rank {} to rank {}", rank_, to));
  if (bytes.size() > INT32_MAX) return InvalidArgumentError("Send: message over 2 GiB");
  const int64_t n = static_cast<int64_t>(bytes.size());
  MPI_Request req[2];
  MPI_Isend(&n, 1, MPI_INT64_T, to, 0, comm_->comm, &req[0]);
  MPI_Isend(bytes.data(), static_cast<int>(n), MPI_BYTE, to, 0, comm_->comm, &req[1]);
  RETURN_IF_ERROR(Wait(&req[0], "send", false, patience));
  return Wait(&req[1], "send", false, patience);
}

Status MpiCommunicator::Recv(int from, std::vector<uint8_t>* bytes, int patience) {
  if (from < 0 || from >= size_ || from == rank_)
    return InvalidArgumentError(fmt::format("Recv on rank {} from rank {}", rank_, from));
  int64_t n = 0;
  MPI_Request req;
  MPI_Irecv(&n, 1, MPI_INT64_T, from, 0, comm_->comm, &req);
  RETURN_IF_ERROR(Wait(&req, "receive", false, patience));
  if (n < 0 || n > INT32_MAX) return DataLossError("Recv: a message of a bad size");
  bytes->resize(static_cast<size_t>(n));
  MPI_Irecv(bytes->data(), static_cast<int>(n), MPI_BYTE, from, 0, comm_->comm, &req);
  return Wait(&req, "receive", false, patience);
}

StatusOr<std::unique_ptr<Communicator>> MpiCommunicator::Split(int color, int key) {
  RETURN_IF_ERROR(Barrier());
  auto sub = std::make_unique<Comm>();
  const int rc = MPI_Comm_split(comm_->comm, color, key, &sub->comm);
  if (rc != MPI_SUCCESS) return UnavailableError("MPI_Comm_split failed: " + MpiErrorText(rc));
  MPI_Comm_set_errhandler(sub->comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(sub->comm, &rank);
  MPI_Comm_size(sub->comm, &size);
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(std::move(sub), rank, size, world_rank_, timeout_));
}

}  // namespace pagellm
