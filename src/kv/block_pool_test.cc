#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "kv/kv_test_util.h"

namespace pagellm {
namespace {

using Ids = std::vector<int32_t>;
using testing::ExpectNoLeakedBlocks;

BlockHash HashOf(int v) {
  BlockHash h{};
  h[0] = static_cast<uint8_t>(v);
  h[31] = 0x5a;
  return h;
}

class BlockPoolTest : public ::testing::Test {
 protected:
  void TearDown() override { ExpectNoLeakedBlocks(pool_); }
  BlockPool pool_{6, /*enable_caching=*/true};  // usable blocks 1..5
};

TEST_F(BlockPoolTest, NullBlockIsNeverHandedOut) {
  EXPECT_EQ(pool_.num_blocks(), 6);
  EXPECT_EQ(pool_.num_free_blocks(), 5);
  EXPECT_EQ(pool_.FreeQueueOrder(), (Ids{1, 2, 3, 4, 5}));
  std::optional<Ids> all = pool_.GetNewBlocks(5);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(*all, (Ids{1, 2, 3, 4, 5}));
  for (int32_t id : *all) EXPECT_EQ(pool_.block(id).ref_cnt, 1);
  EXPECT_EQ(pool_.num_free_blocks(), 0);
  EXPECT_DOUBLE_EQ(pool_.Usage(), 1.0);
  // No room is a value, and nothing changes.
  EXPECT_FALSE(pool_.GetNewBlocks(1).has_value());
  EXPECT_EQ(pool_.num_free_blocks(), 0);
  pool_.FreeBlocks(*all);
}

TEST_F(BlockPoolTest, FailedAllocationChangesNothing) {
  std::optional<Ids> a = pool_.GetNewBlocks(3);
  EXPECT_FALSE(pool_.GetNewBlocks(3).has_value());
  EXPECT_EQ(pool_.FreeQueueOrder(), (Ids{4, 5}));
  pool_.FreeBlocks(*a);
}

TEST_F(BlockPoolTest, RefCountsTouchAndFreeOrder) {
  Ids a = *pool_.GetNewBlocks(3);  // 1 2 3
  EXPECT_EQ(a, (Ids{1, 2, 3}));
  EXPECT_DOUBLE_EQ(pool_.Usage(), 0.6);
  pool_.Touch(Ids{1, 2});  // a second request shares the first two blocks
  EXPECT_EQ(pool_.block(1).ref_cnt, 2);
  EXPECT_EQ(pool_.block(3).ref_cnt, 1);
  // First owner frees in reverse order: only block 3 reaches 0.
  pool_.FreeBlocks(Ids{3, 2, 1});
  EXPECT_EQ(pool_.block(1).ref_cnt, 1);
  EXPECT_EQ(pool_.FreeQueueOrder(), (Ids{4, 5, 3}));
  // Touching a free block takes it out of the free queue.
  pool_.Touch(Ids{3});
  EXPECT_EQ(pool_.FreeQueueOrder(), (Ids{4, 5}));
  pool_.FreeBlocks(Ids{3, 2, 1});
  EXPECT_EQ(pool_.FreeQueueOrder(), (Ids{4, 5, 3, 2, 1}));
  EXPECT_DOUBLE_EQ(pool_.Usage(), 0.0);
}

TEST_F(BlockPoolTest, CachedBlocksStayHittableUntilReusedTailFirst) {
  Ids a = *pool_.GetNewBlocks(3);
  const std::vector<BlockHash> hashes = {HashOf(1), HashOf(2), HashOf(3)};
  pool_.CacheFullBlocks(a, hashes, 0, 2);  // third block not full yet
  EXPECT_EQ(pool_.num_cached_blocks(), 2);
  pool_.CacheFullBlocks(a, hashes, 2, 3);
  EXPECT_EQ(pool_.GetCachedBlock(HashOf(3)), 3);
  // Freed in reverse: the tail block (most specific prefix) is evicted first.
  pool_.FreeBlocks(Ids{3, 2, 1});
  EXPECT_EQ(pool_.FreeQueueOrder(), (Ids{4, 5, 3, 2, 1}));
  EXPECT_DOUBLE_EQ(pool_.Usage(), 0.0);  // cached-but-free counts as free
  EXPECT_EQ(pool_.GetCachedBlock(HashOf(1)), 1);

  Ids b = *pool_.GetNewBlocks(3);
  EXPECT_EQ(b, (Ids{4, 5, 3}));
  EXPECT_EQ(pool_.block(3).hash, std::nullopt);
  EXPECT_EQ(pool_.GetCachedBlock(HashOf(3)), std::nullopt);  // evicted on reuse
  EXPECT_EQ(pool_.GetCachedBlock(HashOf(2)), 2);             // head of the chain survives
  EXPECT_EQ(pool_.num_evictions(), 1);
  EXPECT_EQ(pool_.num_cached_blocks(), 2);
  pool_.FreeBlocks(Ids{3, 5, 4});
}

TEST_F(BlockPoolTest, DuplicateHashesAreKeptNotMerged) {
  Ids a = *pool_.GetNewBlocks(1);
  Ids b = *pool_.GetNewBlocks(1);
  pool_.CacheFullBlocks(a, std::vector<BlockHash>{HashOf(7)}, 0, 1);
  pool_.CacheFullBlocks(b, std::vector<BlockHash>{HashOf(7)}, 0, 1);
  EXPECT_EQ(pool_.num_cached_blocks(), 2);
  EXPECT_EQ(pool_.GetCachedBlock(HashOf(7)), 1);  // earliest inserted
  pool_.UncacheBlock(1);
  EXPECT_EQ(pool_.GetCachedBlock(HashOf(7)), 2);
  pool_.UncacheBlock(2);
  EXPECT_EQ(pool_.GetCachedBlock(HashOf(7)), std::nullopt);
  pool_.FreeBlocks(Ids{2, 1});
}

TEST_F(BlockPoolTest, ResetPrefixCacheOnlyWhenAllBlocksFree) {
  Ids a = *pool_.GetNewBlocks(2);
  pool_.CacheFullBlocks(a, std::vector<BlockHash>{HashOf(1), HashOf(2)}, 0, 2);
  EXPECT_FALSE(pool_.ResetPrefixCache());
  EXPECT_EQ(pool_.GetCachedBlock(HashOf(1)), 1);
  pool_.FreeBlocks(Ids{2, 1});
  EXPECT_TRUE(pool_.ResetPrefixCache());
  EXPECT_EQ(pool_.GetCachedBlock(HashOf(1)), std::nullopt);
  EXPECT_EQ(pool_.num_cached_blocks(), 0);
  EXPECT_EQ(pool_.block(2).hash, std::nullopt);
}

TEST_F(BlockPoolTest, CachingDisabledNeverCaches) {
  BlockPool pool(4, /*enable_caching=*/false);
  Ids a = *pool.GetNewBlocks(2);
  pool.CacheFullBlocks(a, std::vector<BlockHash>{HashOf(1), HashOf(2)}, 0, 2);
  EXPECT_EQ(pool.GetCachedBlock(HashOf(1)), std::nullopt);
  pool.FreeBlocks(Ids{2, 1});
  ExpectNoLeakedBlocks(pool);
}

TEST(BlockPoolDeathTest, MisuseAborts) {
  BlockPool pool(4, true);
  EXPECT_DEATH(pool.FreeBlocks(Ids{1}), "double free");
  EXPECT_DEATH(pool.Touch(Ids{0}), "null block");
  EXPECT_DEATH(pool.FreeBlocks(Ids{0}), "null block");
  Ids a = *pool.GetNewBlocks(1);
  pool.CacheFullBlocks(a, std::vector<BlockHash>{HashOf(1)}, 0, 1);
  EXPECT_DEATH(pool.CacheFullBlocks(a, std::vector<BlockHash>{HashOf(1)}, 0, 1), "already cached");
  pool.FreeBlocks(a);
  ExpectNoLeakedBlocks(pool);
}

}  // namespace
}  // namespace pagellm
