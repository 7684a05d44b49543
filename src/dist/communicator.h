// The collectives a tensor-parallel group needs, and nothing more: an all-reduce of float rows,
// a broadcast of bytes from rank 0, a gather of bytes to rank 0 and a barrier; for pipeline
// parallelism, messages between two ranks (Send / Recv) and sub-groups (Split: the
// tensor-parallel group of each pipeline stage). Implemented over MPI between processes
// (dist/mpi_communicator.h) and between threads of one process for tests
// (dist/local_communicator.h).
//
// Every collective is bounded: a rank that does not join within the communicator's timeout
// turns into an error (Unavailable here; the MPI implementation also aborts the job, since
// a half-finished collective leaves the others waiting), never a hang. Only Broadcast may be
// told to wait without a bound: a worker waiting for the next step of an idle server.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "pagellm/status.h"

namespace pagellm {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // x [n] becomes Σ_r x_r [n] on every rank, summed in rank order: ((x_0 + x_1) + x_2) + ...
  // The order does not depend on timing or on which rank computes it, so the result is the
  // same bits on every rank and in every run. Every rank passes the same n.
  virtual Status AllReduceSum(float* x, int64_t n) = 0;
  // Rank 0's `bytes` (size and contents) on every rank; rank 0's vector is unchanged.
  // wait_forever: no timeout on the wait for rank 0 (workers idle between steps).
  virtual Status Broadcast(std::vector<uint8_t>* bytes, bool wait_forever) = 0;
  // On rank 0, `all` [size] receives every rank's `mine` (sizes may differ), in rank order;
  // `all` is untouched on the other ranks (it may be null there).
  virtual Status GatherToRoot(std::span<const uint8_t> mine,
                              std::vector<std::vector<uint8_t>>* all) = 0;
  virtual Status Barrier() = 0;

  // Point to point (pipeline stages): `bytes` to rank `to`. Returns once the bytes are on their
  // way (copied, or taken by the receiver); waits at most `patience` timeouts for the receiver.
  virtual Status Send(int to, std::span<const uint8_t> bytes, int patience) = 0;
  // The next message rank `from` sent to this rank (messages between two ranks arrive in the
  // order they were sent); waits at most `patience` timeouts for it.
  virtual Status Recv(int from, std::vector<uint8_t>* bytes, int patience) = 0;
  // A communicator of the ranks that pass the same `color`, ranked by `key` (ties by rank): the
  // tensor-parallel group of a pipeline stage. Every rank calls it (a collective); the result
  // has this communicator's timeout and must not outlive it.
  virtual StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) = 0;
};

// x [n] = Σ_r parts[r * n .. (r + 1) * n) in rank order (the reduction of AllReduceSum, shared
// by the implementations so they give the same bits).
void SumInRankOrder(const float* parts, int num_ranks, int64_t n, float* x);

}  // namespace pagellm
