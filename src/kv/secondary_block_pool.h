// SecondaryBlockPool: host-memory blocks that hold the KV of swapped-out requests
// (`--preemption-mode swap`, `--swap-space` GiB).
//
// Unlike the device pool it has no null block, no prefix cache and no sharing: each swapped
// request owns its blocks exclusively until it is swapped back in or finished. It reuses the
// same FreeBlockQueue so allocation order is deterministic (lowest free ids first on a fresh
// pool, then least recently freed).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kv/free_block_queue.h"

namespace pagellm {

class SecondaryBlockPool {
 public:
  // All num_blocks ids (0 .. num_blocks-1) are usable; 0 blocks disables swapping.
  explicit SecondaryBlockPool(int32_t num_blocks);

  int32_t num_blocks() const { return free_queue_.capacity(); }
  int32_t num_free_blocks() const { return free_queue_.size(); }
  // 1 - free/total; 0 for an empty pool (vllm:cpu_cache_usage_perc in V0).
  double Usage() const;

  // n blocks, or nullopt with nothing changed if fewer are free.
  std::optional<std::vector<int32_t>> Allocate(int32_t n);
  // Returns blocks to the pool; each must currently be allocated.
  void Free(std::span<const int32_t> ids);

 private:
  FreeBlockQueue free_queue_;
};

}  // namespace pagellm
