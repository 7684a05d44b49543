// A Communicator between threads of one process: `size` ranks share one exchange area. For
// unit tests of the collectives and of tensor-parallel code without MPI.
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

}  // namespace pagellm
