#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "kv/kv_test_util.h"

namespace pagellm {
namespace {

using Ids = std::vector<int32_t>;
using Copies = std::vector<BlockCopy>;
using testing::ExpectNoLeakedBlocks;
using testing::Iota;
using testing::MakeRequest;

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Ids Table(const KvCacheManager& kv, const Request& r) {
  std::span<const int32_t> t = kv.BlockTable(r.id());
  return Ids(t.begin(), t.end());
}

class KvCacheManagerTest : public ::testing::Test {
 protected:
  void TearDown() override { ExpectNoLeakedBlocks(kv_); }
  // block_size 4, usable blocks 1..9, prefix caching on, max_model_len 64.
  KvCacheManager kv_{4, 10, true, 64};
};

TEST_F(KvCacheManagerTest, AllocateGrowsTableAndFreesInReverse) {
  Request a = MakeRequest("a", Iota(10));
  EXPECT_EQ(kv_.AllocateSlots(a, 10), (Ids{1, 2, 3}));
  EXPECT_EQ(Table(kv_, a), (Ids{1, 2, 3}));
  EXPECT_EQ(a.block_hashes.size(), 2u);
  EXPECT_TRUE(kv_.block_pool().block(1).hash.has_value());  // full blocks cached
  EXPECT_TRUE(kv_.block_pool().block(2).hash.has_value());
  EXPECT_FALSE(kv_.block_pool().block(3).hash.has_value());  // partial block not
  a.num_computed_tokens = 10;

  a.AppendOutputToken(100);  // 11 tokens: still fits 3 blocks
  EXPECT_EQ(kv_.AllocateSlots(a, 1), Ids{});
  a.num_computed_tokens = 11;
  a.AppendOutputToken(101);  // 12 tokens: block 3 becomes full and is cached
  EXPECT_EQ(kv_.AllocateSlots(a, 1), Ids{});
  EXPECT_TRUE(kv_.block_pool().block(3).hash.has_value());
  a.num_computed_tokens = 12;
  a.AppendOutputToken(102);
  EXPECT_EQ(kv_.AllocateSlots(a, 1), (Ids{4}));
  a.num_computed_tokens = 13;
  EXPECT_EQ(Table(kv_, a), (Ids{1, 2, 3, 4}));
  EXPECT_DOUBLE_EQ(kv_.Usage(), 4.0 / 9.0);

  kv_.Free(a);
  EXPECT_FALSE(kv_.HasBlocks("a"));
  EXPECT_EQ(kv_.block_pool().FreeQueueOrder(), (Ids{5, 6, 7, 8, 9, 4, 3, 2, 1}));
}

TEST_F(KvCacheManagerTest, NoRoomIsAValueAndChangesNothing) {
  Request a = MakeRequest("a", Iota(40));
  EXPECT_EQ(kv_.AllocateSlots(a, 40), std::nullopt);  // 10 blocks > 9 usable
  EXPECT_FALSE(kv_.HasBlocks("a"));
  EXPECT_EQ(kv_.num_free_blocks(), 9);
  EXPECT_EQ(kv_.AllocateSlots(a, 32, 0, {}, /*num_lookahead_tokens=*/5), std::nullopt);
  EXPECT_EQ(kv_.AllocateSlots(a, 32, 0, {}, 4), (Ids{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  a.num_computed_tokens = 32;
  // A running request that cannot grow keeps what it has.
  EXPECT_EQ(kv_.AllocateSlots(a, 8), std::nullopt);
  EXPECT_EQ(Table(kv_, a).size(), 9u);
  kv_.Free(a);
}

TEST_F(KvCacheManagerTest, SlotsAreCappedAtMaxModelLen) {
  KvCacheManager kv(4, 10, true, /*max_model_len=*/16);
  Request a = MakeRequest("a", Iota(15));
  EXPECT_EQ(kv.AllocateSlots(a, 15, 0, {}, /*num_lookahead_tokens=*/8), (Ids{1, 2, 3, 4}));
  a.num_computed_tokens = 15;
  kv.Free(a);
  ExpectNoLeakedBlocks(kv);
}

TEST_F(KvCacheManagerTest, PrefixHitTouchesCachedBlocks) {
  Request a = MakeRequest("a", Iota(10));
  ASSERT_TRUE(kv_.AllocateSlots(a, 10));
  a.num_computed_tokens = 10;
  kv_.Free(a);
  EXPECT_EQ(kv_.block_pool().FreeQueueOrder(), (Ids{4, 5, 6, 7, 8, 9, 3, 2, 1}));

  Request b = MakeRequest("b", Concat(Iota(8), {50, 51, 52}));
  ComputedBlocks hit = kv_.GetComputedBlocks(b);
  EXPECT_EQ(hit.block_ids, (Ids{1, 2}));
  EXPECT_EQ(hit.num_tokens, 8);
  EXPECT_EQ(kv_.AllocateSlots(b, 3, hit.num_tokens, hit.block_ids), (Ids{4}));
  b.num_computed_tokens = 8;
  EXPECT_EQ(Table(kv_, b), (Ids{1, 2, 4}));
  EXPECT_EQ(kv_.block_pool().block(1).ref_cnt, 1);
  EXPECT_EQ(kv_.block_pool().FreeQueueOrder(), (Ids{5, 6, 7, 8, 9, 3}));

  // A third request shares the same two blocks while b holds them.
  Request c = MakeRequest("c", Concat(Iota(8), {60}));
  hit = kv_.GetComputedBlocks(c);
  EXPECT_EQ(hit.block_ids, (Ids{1, 2}));
  EXPECT_EQ(kv_.AllocateSlots(c, 1, hit.num_tokens, hit.block_ids), (Ids{5}));
  c.num_computed_tokens = 8;
  EXPECT_EQ(kv_.block_pool().block(1).ref_cnt, 2);
  EXPECT_EQ(kv_.block_pool().block(2).ref_cnt, 2);

  const PrefixCacheStats& s = kv_.prefix_cache_stats();
  EXPECT_EQ(s.requests, 3);
  EXPECT_EQ(s.queries, 10 + 11 + 9);
  EXPECT_EQ(s.hits, 8 + 8);
  EXPECT_EQ(s.preempted_requests, 0);

  b.num_computed_tokens = 11;
  kv_.Free(b);
  EXPECT_EQ(kv_.block_pool().block(1).ref_cnt, 1);
  EXPECT_EQ(kv_.block_pool().FreeQueueOrder(), (Ids{6, 7, 8, 9, 3, 4}));
  c.num_computed_tokens = 9;
  kv_.Free(c);
  EXPECT_EQ(kv_.block_pool().FreeQueueOrder(), (Ids{6, 7, 8, 9, 3, 4, 5, 2, 1}));
}

TEST_F(KvCacheManagerTest, HitIsCappedAtNumTokensMinusOne) {
  Request a = MakeRequest("a", Iota(8));
  ASSERT_TRUE(kv_.AllocateSlots(a, 8));
  a.num_computed_tokens = 8;
  kv_.Free(a);
  // Same 8 tokens: both blocks are cached, but the last token must be computed for its logits,
  // and hits are block aligned, so only the first block is reused.
  Request b = MakeRequest("b", Iota(8));
  EXPECT_EQ(kv_.GetComputedBlocks(b).block_ids, (Ids{1}));
  Request c = MakeRequest("c", Iota(9));
  EXPECT_EQ(kv_.GetComputedBlocks(c).block_ids, (Ids{1, 2}));
}

TEST_F(KvCacheManagerTest, PromptLogprobsSkipTheLookup) {
  Request a = MakeRequest("a", Iota(9));
  ASSERT_TRUE(kv_.AllocateSlots(a, 9));
  a.num_computed_tokens = 9;
  kv_.Free(a);
  Request b = MakeRequest("b", Iota(9));
  b.skip_prefix_cache = true;
  EXPECT_EQ(kv_.GetComputedBlocks(b).num_tokens, 0);
  ASSERT_TRUE(kv_.AllocateSlots(b, 9));
  b.num_computed_tokens = 9;
  EXPECT_EQ(kv_.prefix_cache_stats().requests, 1);  // b is not a query
  kv_.Free(b);
}

TEST_F(KvCacheManagerTest, SaltsIsolateTenants) {
  Request a = MakeRequest("a", Iota(9));
  a.cache_salt = "tenant-a";
  ASSERT_TRUE(kv_.AllocateSlots(a, 9));
  a.num_computed_tokens = 9;
  kv_.Free(a);

  Request other = MakeRequest("other", Iota(9));
  other.cache_salt = "tenant-b";
  EXPECT_EQ(kv_.GetComputedBlocks(other).num_tokens, 0);
  Request unsalted = MakeRequest("unsalted", Iota(9));
  EXPECT_EQ(kv_.GetComputedBlocks(unsalted).num_tokens, 0);
  Request same = MakeRequest("same", Iota(9));
  same.cache_salt = "tenant-a";
  EXPECT_EQ(kv_.GetComputedBlocks(same).block_ids, (Ids{1, 2}));
}

TEST_F(KvCacheManagerTest, KeySpacesNeverShareBlocks) {
  // Two managers stand for two KV dtypes; the same tokens give disjoint keys.
  KvCacheManager fp32(4, 10, true, 64, 0, "m/kv=auto");
  KvCacheManager fp8(4, 10, true, 64, 0, "m/kv=fp8_e4m3");
  Request a = MakeRequest("a", Iota(8));
  Request b = MakeRequest("b", Iota(8));
  fp32.UpdateBlockHashes(a);
  fp8.UpdateBlockHashes(b);
  EXPECT_NE(a.block_hashes[0], b.block_hashes[0]);
}

TEST_F(KvCacheManagerTest, TailBlocksAreEvictedFirst) {
  KvCacheManager kv(4, 8, true, 64);  // usable 1..7
  Request a = MakeRequest("a", Iota(12));
  ASSERT_TRUE(kv.AllocateSlots(a, 12));
  a.num_computed_tokens = 12;
  kv.Free(a);
  EXPECT_EQ(kv.block_pool().FreeQueueOrder(), (Ids{4, 5, 6, 7, 3, 2, 1}));

  Request b = MakeRequest("b", Iota(20, 100));
  EXPECT_EQ(kv.AllocateSlots(b, 20), (Ids{4, 5, 6, 7, 3}));  // evicts a's tail block 3
  b.num_computed_tokens = 20;
  EXPECT_EQ(kv.block_pool().num_evictions(), 1);

  Request c = MakeRequest("c", Concat(Iota(12), {99}));
  ComputedBlocks hit = kv.GetComputedBlocks(c);
  EXPECT_EQ(hit.block_ids, (Ids{1, 2}));  // head of a's chain survived
  kv.Free(b);
  ASSERT_TRUE(kv.AllocateSlots(c, 5, hit.num_tokens, hit.block_ids));
  c.num_computed_tokens = 13;
  kv.Free(c);
  ExpectNoLeakedBlocks(kv);
}

TEST_F(KvCacheManagerTest, BlocksCachedAheadOfComputationAreUncachedOnFree) {
  // a is allocated (its full blocks are cached at allocation, as in vLLM) but freed before its
  // tokens were computed, as a victim preempted in the same step.
  Request a = MakeRequest("a", Iota(8));
  ASSERT_TRUE(kv_.AllocateSlots(a, 8));
  EXPECT_EQ(kv_.block_pool().num_cached_blocks(), 2);
  kv_.Free(a);  // num_computed_tokens is still 0
  EXPECT_EQ(kv_.block_pool().num_cached_blocks(), 0);
  Request b = MakeRequest("b", Iota(9));
  EXPECT_EQ(kv_.GetComputedBlocks(b).num_tokens, 0);

  // Partly computed: the computed block keeps its key.
  Request c = MakeRequest("c", Iota(8));
  ASSERT_TRUE(kv_.AllocateSlots(c, 8));
  c.num_computed_tokens = 4;
  kv_.Free(c);
  EXPECT_EQ(kv_.GetComputedBlocks(b).num_tokens, 4);
}

TEST_F(KvCacheManagerTest, SpeculativeTokensAreNeverCached) {
  Request a = MakeRequest("a", Iota(6));
  ASSERT_TRUE(kv_.AllocateSlots(a, 6));
  a.num_computed_tokens = 6;
  a.AppendOutputToken(7);
  a.spec_token_ids = {8, 9, 10};
  // The last sampled token plus three drafts: slots up to position 9.
  EXPECT_EQ(kv_.AllocateSlots(a, 4), (Ids{3}));
  EXPECT_FALSE(kv_.block_pool().block(2).hash.has_value());  // would include draft 8
  // One draft accepted, plus the bonus token.
  a.num_computed_tokens = 8;
  a.AppendOutputToken(8);
  a.AppendOutputToken(20);
  a.spec_token_ids.clear();
  EXPECT_EQ(kv_.AllocateSlots(a, 1), Ids{});
  EXPECT_TRUE(kv_.block_pool().block(2).hash.has_value());
  a.num_computed_tokens = 9;
  kv_.Free(a);
}

TEST_F(KvCacheManagerTest, ResetPrefixCache) {
  Request a = MakeRequest("a", Iota(9));
  ASSERT_TRUE(kv_.AllocateSlots(a, 9));
  a.num_computed_tokens = 9;
  EXPECT_FALSE(kv_.ResetPrefixCache());
  kv_.Free(a);
  EXPECT_TRUE(kv_.ResetPrefixCache());
  Request b = MakeRequest("b", Iota(9));
  EXPECT_EQ(kv_.GetComputedBlocks(b).num_tokens, 0);
}

TEST_F(KvCacheManagerTest, PreemptedRequestsCountSeparately) {
  Request a = MakeRequest("a", Iota(9));
  ASSERT_TRUE(kv_.AllocateSlots(a, 9));
  a.num_computed_tokens = 9;
  kv_.Free(a);
  a.num_computed_tokens = 0;
  a.num_preemptions = 1;
  ComputedBlocks hit = kv_.GetComputedBlocks(a);  // re-hits its own blocks
  EXPECT_EQ(hit.block_ids, (Ids{1, 2}));
  ASSERT_TRUE(kv_.AllocateSlots(a, 1, hit.num_tokens, hit.block_ids));
  a.num_computed_tokens = 9;
  const PrefixCacheStats& s = kv_.prefix_cache_stats();
  EXPECT_EQ(s.requests, 1);
  EXPECT_EQ(s.queries, 9);
  EXPECT_EQ(s.hits, 0);
  EXPECT_EQ(s.preempted_requests, 1);
  EXPECT_EQ(s.preempted_queries, 9);
  EXPECT_EQ(s.preempted_hits, 8);
  kv_.Free(a);
}

TEST(KvCacheManagerSwapTest, SwapOutAndInReturnCopyLists) {
  // usable device blocks 1..5, host blocks 0..2.
  KvCacheManager kv(4, 6, true, 64, /*num_secondary_blocks=*/3);
  ASSERT_TRUE(kv.swap_enabled());
  Request a = MakeRequest("a", Iota(10));
  ASSERT_TRUE(kv.AllocateSlots(a, 10));
  a.num_computed_tokens = 10;

  std::optional<Copies> out = kv.SwapOut(a);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(*out, (Copies{{1, 0}, {2, 1}, {3, 2}}));
  EXPECT_TRUE(kv.IsSwapped("a"));
  EXPECT_FALSE(kv.HasBlocks("a"));
  EXPECT_EQ(kv.num_free_blocks(), 5);
  EXPECT_EQ(kv.secondary_pool().num_free_blocks(), 0);
  EXPECT_DOUBLE_EQ(kv.secondary_pool().Usage(), 1.0);

  Request b = MakeRequest("b", Iota(8, 200));
  EXPECT_EQ(kv.AllocateSlots(b, 8), (Ids{4, 5}));
  b.num_computed_tokens = 8;
  // The secondary pool is full: swapping b out is refused and changes nothing.
  EXPECT_EQ(kv.SwapOut(b), std::nullopt);
  EXPECT_EQ(Table(kv, b), (Ids{4, 5}));

  // a comes back with one more token to compute: 11 slots = 3 blocks.
  std::optional<Copies> in = kv.SwapIn(a, 1);
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(*in, (Copies{{0, 3}, {1, 2}, {2, 1}}));
  EXPECT_EQ(Table(kv, a), (Ids{3, 2, 1}));
  EXPECT_FALSE(kv.IsSwapped("a"));
  EXPECT_EQ(kv.secondary_pool().num_free_blocks(), 3);
  // Restored full blocks are cached again under a's keys.
  EXPECT_EQ(kv.block_pool().GetCachedBlock(a.block_hashes[0]), 3);
  EXPECT_EQ(kv.block_pool().GetCachedBlock(a.block_hashes[1]), 2);
  a.num_computed_tokens = 11;
  kv.Free(a);
  kv.Free(b);
  ExpectNoLeakedBlocks(kv);
}

TEST(KvCacheManagerSwapTest, SwapInWithoutRoomKeepsTheRequestSwapped) {
  KvCacheManager kv(4, 4, false, 64, 4);  // usable device blocks 1..3
  Request a = MakeRequest("a", Iota(6));
  ASSERT_TRUE(kv.AllocateSlots(a, 6));
  a.num_computed_tokens = 6;
  ASSERT_EQ(kv.SwapOut(a), (Copies{{1, 0}, {2, 1}}));
  Request b = MakeRequest("b", Iota(9));
  ASSERT_TRUE(kv.AllocateSlots(b, 9));
  b.num_computed_tokens = 9;
  EXPECT_EQ(kv.SwapIn(a, 1), std::nullopt);
  EXPECT_TRUE(kv.IsSwapped("a"));
  EXPECT_EQ(kv.secondary_pool().num_free_blocks(), 2);
  kv.Free(a);  // frees the host blocks of a swapped request
  kv.Free(b);
  ExpectNoLeakedBlocks(kv);
}

TEST(KvCacheManagerSwapTest, OnlyComputedBlocksAreCopied) {
  KvCacheManager kv(4, 8, true, 64, 8);
  Request a = MakeRequest("a", Iota(16));
  ASSERT_TRUE(kv.AllocateSlots(a, 16));  // 4 blocks, nothing computed yet beyond 5 tokens
  a.num_computed_tokens = 5;
  EXPECT_EQ(kv.SwapOut(a), (Copies{{1, 0}, {2, 1}}));
  // Blocks 2..4 were cached for tokens never computed: their keys are gone.
  EXPECT_EQ(kv.block_pool().num_cached_blocks(), 1);
  kv.Free(a);
  ExpectNoLeakedBlocks(kv);
}

}  // namespace
}  // namespace pagellm
