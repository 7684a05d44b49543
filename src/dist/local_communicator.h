// A Communicator between threads of one process: `size` ranks share one exchange area. For
// unit tests of the collectives and of tensor-parallel code without MPI, and for the ranks of
// a tensor-parallel engine run as threads (backend/tensor_parallel_threads.h: the Python LLM).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "dist/communicator.h"

namespace pagellm {

// One communicator per rank of a new group; rank r's is element r. Each must be used by one
// thread at a time; a collective that some rank does not join within `timeout` returns
// Unavailable on the ranks that did.
std::vector<std::unique_ptr<Communicator>> CreateLocalGroup(int size,
                                                            std::chrono::milliseconds timeout);

// Ends the group of `member` (a communicator of CreateLocalGroup): every collective of its
// ranks, waiting now or started later, returns `why` (not Ok) at once. A rank that fails tells
// the others this way instead of leaving them to time out.
void AbortLocalGroup(Communicator& member, const Status& why);

}  // namespace pagellm
