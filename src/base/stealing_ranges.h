// Contiguous shares of the units [0, units) for `parts` threads, handed out by atomics: part
// p's owner claims its share front to back (ClaimFront), and a thread whose own share is done
// takes single units from the back of another's (StealBack). Each unit is handed out once.
//
// Why not one shared queue of tasks: a decode MatMul streams weights from memory, and every
// task a thread starts away from where its last one ended restarts its stream (software
// prefetches stop at a task's end; the hardware prefetcher starts over). With shares, each
// thread streams one contiguous range per call, and a thread slowed by the shared bus or a
// preempted vCPU still hands its tail to the others.
#pragma once

#include <atomic>
#include <cstdint>

namespace pagellm {

class StealingRanges {
 public:
  static constexpr int kMaxParts = 64;

  // parts in [1, kMaxParts]; units < 2^31. Part p's share is [ShareBoundary(p),
  // ShareBoundary(p + 1)).
  StealingRanges(int64_t units, int parts);
  StealingRanges(const StealingRanges&) = delete;
  StealingRanges& operator=(const StealingRanges&) = delete;

  // The first unit of part p's share of `units` split `parts` ways (p == parts: units).
  static constexpr int64_t ShareBoundary(int64_t units, int parts, int p) {
    return units * p / parts;
  }

  int parts() const { return parts_; }
  // Part p's share as it was before any claim.
  int64_t ShareBegin(int part) const { return bounds_[part]; }
  int64_t ShareEnd(int part) const { return bounds_[part + 1]; }

  // The first unit of part's share not yet handed out; false when none is left.
  bool ClaimFront(int part, int64_t* unit);
  // The last unit of part's share not yet handed out; false when none is left.
  bool StealBack(int part, int64_t* unit);

 private:
  // (back << 32) | front: the share's units not handed out are [front, back).
  struct alignas(64) Share {
    std::atomic<uint64_t> front_back{0};
  };
  int parts_;
  int64_t bounds_[kMaxParts + 1];
  Share shares_[kMaxParts];
};

}  // namespace pagellm
