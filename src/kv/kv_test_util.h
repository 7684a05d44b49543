// Test helpers shared by the KV cache and scheduler tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_cache_manager.h"
#include "kv/request.h"

namespace pagellm::testing {

// Every test ends with this: all usable blocks free, with ref_cnt 0, exactly once in the free
// queue, and the null block never in it.
inline void ExpectNoLeakedBlocks(const BlockPool& pool) {
  EXPECT_EQ(pool.num_free_blocks(), pool.num_blocks() - 1) << "leaked device blocks";
  for (int32_t id = 0; id < pool.num_blocks(); ++id) {
    EXPECT_EQ(pool.block(id).ref_cnt, 0) << "block " << id;
  }
  std::vector<int32_t> order = pool.FreeQueueOrder();
  std::sort(order.begin(), order.end());
  std::vector<int32_t> expected(pool.num_blocks() - 1);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(order, expected) << "free queue must hold every usable block once, never block 0";
}

inline void ExpectNoLeakedBlocks(const KvCacheManager& kv) {
  ExpectNoLeakedBlocks(kv.block_pool());
  EXPECT_EQ(kv.secondary_pool().num_free_blocks(), kv.secondary_pool().num_blocks())
      << "leaked host (swap) blocks";
}

// tokens = {first, first + 1, ...}: distinct runs make distinct prefixes.
inline std::vector<int32_t> Iota(int32_t n, int32_t first = 1) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

inline Request MakeRequest(const std::string& id, std::vector<int32_t> prompt,
                           int32_t max_tokens = 16) {
  return Request(id, std::move(prompt), max_tokens);
}

}  // namespace pagellm::testing
