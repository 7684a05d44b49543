#include "base/stealing_ranges.h"

#include "pagellm/check.h"

namespace pagellm {

namespace {
constexpr uint64_t Pack(uint64_t front, uint64_t back) {
  return (back << 32) | front;
}
constexpr int64_t FrontOf(uint64_t v) {
  return static_cast<int64_t>(v & 0xffffffffu);
}
constexpr int64_t BackOf(uint64_t v) {
  return static_cast<int64_t>(v >> 32);
}
}  // namespace

StealingRanges::StealingRanges(int64_t units, int parts) : parts_(parts) {
  CHECK(parts >= 1 && parts <= kMaxParts) << parts;
  CHECK(units >= 0 && units < (int64_t{1} << 31)) << units;
  for (int p = 0; p <= parts; ++p) bounds_[p] = ShareBoundary(units, parts, p);
  for (int p = 0; p < parts; ++p) {
    shares_[p].front_back.store(Pack(bounds_[p], bounds_[p + 1]), std::memory_order_relaxed);
  }
}

bool StealingRanges::ClaimFront(int part, int64_t* unit) {
  std::atomic<uint64_t>& s = shares_[part].front_back;
  uint64_t v = s.load(std::memory_order_acquire);
  while (FrontOf(v) < BackOf(v)) {
    if (s.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) {
      *unit = FrontOf(v);
      return true;
    }
  }
  return false;
}

bool StealingRanges::StealBack(int part, int64_t* unit) {
  std::atomic<uint64_t>& s = shares_[part].front_back;
  uint64_t v = s.load(std::memory_order_acquire);
  while (FrontOf(v) < BackOf(v)) {
    const int64_t back = BackOf(v) - 1;
    if (s.compare_exchange_weak(v, Pack(FrontOf(v), back), std::memory_order_acq_rel)) {
      *unit = back;
      return true;
    }
  }
  return false;
}

}  // namespace pagellm
