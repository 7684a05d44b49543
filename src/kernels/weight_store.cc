#include "kernels/weight_store.h"

#include <algorithm>
#include <cstring>

#include "pagellm/check.h"

namespace pagellm {

uint8_t* WeightStore::Allocate(int64_t bytes) {
  CHECK_GE(bytes, 0);
  const int64_t rounded = std::max<int64_t>(64, (bytes + 63) / 64 * 64);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>(rounded)));
  CHECK(p != nullptr) << "out of memory for " << rounded << " bytes of repacked weights";
  std::memset(p, 0, static_cast<size_t>(rounded));
  buffers_.emplace_back(p);
  bytes_ += rounded;
  return p;
}

const uint8_t* WeightStore::Intern(const uint8_t* bytes, int64_t n) {
  for (const auto& [p, size] : interned_) {
    if (size == n && std::memcmp(p, bytes, static_cast<size_t>(n)) == 0) return p;
  }
  uint8_t* p = Allocate(n);
  std::memcpy(p, bytes, static_cast<size_t>(n));
  interned_.emplace_back(p, n);
  return p;
}

}  // namespace pagellm
