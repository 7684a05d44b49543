#include "kv/secondary_block_pool.h"

#include "pagellm/check.h"

namespace pagellm {

SecondaryBlockPool::SecondaryBlockPool(int32_t num_blocks) : free_queue_(num_blocks) {}

double SecondaryBlockPool::Usage() const {
  if (num_blocks() == 0) return 0.0;
  return 1.0 - static_cast<double>(num_free_blocks()) / num_blocks();
}

std::optional<std::vector<int32_t>> SecondaryBlockPool::Allocate(int32_t n) {
  CHECK_GE(n, 0);
  if (n > num_free_blocks()) return std::nullopt;
  return free_queue_.PopFrontN(n);
}

void SecondaryBlockPool::Free(std::span<const int32_t> ids) {
  free_queue_.AppendN(ids);
}

}  // namespace pagellm
