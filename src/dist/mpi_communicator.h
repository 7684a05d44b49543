// A Communicator over MPI_COMM_WORLD (Debian's OpenMPI): one process per rank, started by
// mpirun on one machine or several; MPI moves the bytes over shared memory between processes
// of one machine and TCP (or InfiniBand) between machines.
//
// The collectives are MPI's non-blocking ones completed by a polling loop, so that each can
// time out: a rank that does not answer within the timeout makes this rank log one error and
// abort the whole job (MPI_Abort), which ends every rank. A dead rank ends the job sooner:
// mpirun kills the others when one exits abnormally. The loop backs off to short sleeps after a
// few thousand polls, so a rank waiting for its peers leaves the cores to them (ranks may share
// cores: mpirun --oversubscribe).
#pragma once

#include <chrono>
#include <memory>

#include "dist/communicator.h"

namespace pagellm {

class MpiCommunicator : public Communicator {
 public:
  // Initialises MPI (MPI_THREAD_SERIALIZED: the engine loop thread may make the calls) once per
  // process; finalises it when destroyed.
  static StatusOr<std::unique_ptr<MpiCommunicator>> Create(std::chrono::milliseconds timeout);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status AllReduceSum(float* x, int64_t n) override;
  Status Broadcast(std::vector<uint8_t>* bytes, bool wait_forever) override;
  Status GatherToRoot(std::span<const uint8_t> mine,
                      std::vector<std::vector<uint8_t>>* all) override;
  Status Barrier() override;
  // A message is a size, then the bytes (two MPI messages on the same tag: they arrive in
  // order).
  Status Send(int to, std::span<const uint8_t> bytes, int patience) override;
  Status Recv(int from, std::vector<uint8_t>* bytes, int patience) override;
  // A bounded barrier, then MPI_Comm_split (which has no non-blocking form: every rank is in
  // the call by then).
  StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override;

 private:
  struct Comm;  // the MPI_Comm (kept out of this header with mpi.h)
  MpiCommunicator(std::unique_ptr<Comm> comm, int rank, int size, int world_rank,
                  std::chrono::milliseconds timeout);
  // Completes a started request (an MPI_Request, as void* to keep mpi.h out of this header).
  Status Wait(void* request, const char* what, bool wait_forever, int patience = 1);

  std::unique_ptr<Comm> comm_;
  const int rank_, size_;
  const int world_rank_;  // named in errors (this rank's place in MPI_COMM_WORLD)
  const std::chrono::milliseconds timeout_;
  std::vector<float> parts_;  // AllReduceSum's gathered partials [size][n]
};

}  // namespace pagellm
