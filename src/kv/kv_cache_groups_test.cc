// KV cache groups: layer grouping, and the manager's sliding-window block tables (freeing
// outside the window, the bound on blocks held, prefix hits that need the window's blocks,
// swap).
#include "kv/kv_cache_groups.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_test_util.h"

namespace pagellm {
namespace {

using Ids = std::vector<int32_t>;
using testing::ExpectNoLeakedBlocks;
using testing::Iota;
using testing::MakeRequest;

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Gemma 3's pattern: every sixth layer is global, the others have `window`.
std::vector<int> Gemma3Windows(int layers, int window) {
  std::vector<int> w(layers, window);
  for (int l = 5; l < layers; l += 6) w[l] = 0;
  return w;
}

TEST(KvCacheGroupsTest, Gemma3OneBGroupsTwoLayersPerBlock) {
  // 4 global + 22 local layers: G = gcd(4, 22) = 2, 2 full groups then 11 window groups.
  const KvCacheGroups g = MakeKvCacheGroups(Gemma3Windows(26, 512));
  EXPECT_EQ(g.layers_per_group, 2);
  ASSERT_EQ(g.num_groups(), 13);
  EXPECT_EQ(g.num_full_groups(), 2);
  EXPECT_EQ(g.groups[0].layers, (std::vector<int>{5, 11}));
  EXPECT_EQ(g.groups[1].layers, (std::vector<int>{17, 23}));
  EXPECT_EQ(g.groups[2].layers, (std::vector<int>{0, 1}));
  EXPECT_EQ(g.groups[2].sliding_window, 512);
  EXPECT_EQ(g.layer_group[23], 1);
  EXPECT_EQ(g.layer_region[23], 1);
  EXPECT_EQ(g.layer_group[25], 12);
  EXPECT_EQ(g.layer_region[24], 0);
  EXPECT_FALSE(g.is_single_full());
}

TEST(KvCacheGroupsTest, ShapesOfOtherModels) {
  // tiny-gemma3: 5 local + 1 global -> one layer per group.
  const KvCacheGroups tiny = MakeKvCacheGroups(Gemma3Windows(6, 8));
  EXPECT_EQ(tiny.layers_per_group, 1);
  EXPECT_EQ(tiny.windows(), (std::vector<int32_t>{0, 8, 8, 8, 8, 8}));
  // Gemma 2 alternates local and global: two groups of half the layers.
  const KvCacheGroups gemma2 = MakeKvCacheGroups(std::vector<int>{8, 0, 8, 0});
  EXPECT_EQ(gemma2.layers_per_group, 2);
  EXPECT_EQ(gemma2.windows(), (std::vector<int32_t>{0, 8}));
  EXPECT_EQ(gemma2.groups[0].layers, (std::vector<int>{1, 3}));
  // Mistral: every layer has the window, one window group.
  const KvCacheGroups mistral = MakeKvCacheGroups(std::vector<int>{16, 16, 16});
  EXPECT_EQ(mistral.windows(), (std::vector<int32_t>{16}));
  EXPECT_EQ(mistral.layer_region, (std::vector<int>{0, 1, 2}));
  // No window: the historic layout.
  const KvCacheGroups llama = MakeKvCacheGroups(std::vector<int>{0, 0, 0});
  EXPECT_TRUE(llama.is_single_full());
  EXPECT_EQ(llama.layer_region, SingleFullKvCacheGroup(3).layer_region);
}

TEST(KvCacheGroupsTest, BlocksPerRequest) {
  EXPECT_EQ(WindowBlocks(512, 16), 33);  // window / block_size + 1
  EXPECT_EQ(WindowBlocks(8, 4), 3);
  EXPECT_EQ(WindowBlocks(9, 4), 3);
  EXPECT_EQ(WindowBlocks(10, 4), 4);
  EXPECT_EQ(WindowBlocks(8, 4, /*step_tokens=*/5), 4);  // positions p-7 .. p+4: 12 -> 4 blocks
  // A 32K-token Gemma-3-1B request: 2 full groups of 2048 blocks, 11 window groups of 33.
  const std::vector<int32_t> w = MakeKvCacheGroups(Gemma3Windows(26, 512)).windows();
  EXPECT_EQ(BlocksPerRequest(w, 16, 32768), 2 * 2048 + 11 * 33);
  // Shorter than the window: every group holds the whole request.
  EXPECT_EQ(BlocksPerRequest(w, 16, 100), 13 * 7);
}

// Blocks of `table` that are not the null block.
int32_t Held(std::span<const int32_t> table) {
  return static_cast<int32_t>(std::count_if(
      table.begin(), table.end(), [](int32_t b) { return b != BlockPool::kNullBlockId; }));
}

// Groups {full, window 8}, block_size 4.
class WindowKvTest : public ::testing::Test {
 protected:
  void TearDown() override { ExpectNoLeakedBlocks(kv_); }
  // Runs req from its prompt to `total` tokens: prefill in one step, then one token a step,
  // checking after every allocation that the window group holds at most 8 / 4 + 1 blocks, that
  // its null entries are exactly the blocks before the window of the next token, and that the
  // full group holds every block.
  void Decode(KvCacheManager& kv, Request& req, int32_t total, int32_t* max_window_held) {
    ASSERT_TRUE(kv.AllocateSlots(req, req.num_tokens() - req.num_computed_tokens));
    req.num_computed_tokens = req.num_tokens();
    while (req.num_tokens() < total) {
      req.AppendOutputToken(1000 + req.num_tokens());
      ASSERT_TRUE(kv.AllocateSlots(req, 1));
      std::span<const std::vector<int32_t>> t = kv.BlockTables(req.id());
      ASSERT_EQ(t.size(), 2u);
      const int32_t pos = req.num_computed_tokens;  // the token being computed
      EXPECT_EQ(Held(t[0]), pos / 4 + 1);
      const int32_t first = std::max(0, pos - 8 + 1) / 4;
      for (int32_t i = 0; i < static_cast<int32_t>(t[1].size()); ++i)
        EXPECT_EQ(t[1][i] == BlockPool::kNullBlockId, i < first) << "pos " << pos << " block " << i;
      *max_window_held = std::max(*max_window_held, Held(t[1]));
      EXPECT_LE(Held(t[1]), 8 / 4 + 1);
      EXPECT_EQ(kv.NumBlocksHeld(req.id()), Held(t[0]) + Held(t[1]));
      req.num_computed_tokens += 1;
    }
  }
  KvCacheManager kv_{4, 64, true, 256, 16, "", {0, 8}};
};

TEST_F(WindowKvTest, LongDecodeHoldsOnlyTheWindow) {
  Request a = MakeRequest("a", Iota(10), 200);
  int32_t max_held = 0;
  Decode(kv_, a, 150, &max_held);
  EXPECT_EQ(max_held, 3);  // = WindowBlocks(8, 4)
  // 150 tokens: the full group has all 38 blocks, the window group 3 at most.
  EXPECT_LE(kv_.NumBlocksHeld("a"), 38 + 3);
  EXPECT_LE(kv_.NumBlocksHeld("a"), kv_.NumPoolBlocksForRequest(150));
  // Without freeing, 76 blocks would not fit the 63-block pool.
  kv_.Free(a);
}

TEST_F(WindowKvTest, PrefixHitNeedsTheWindowsBlocks) {
  // Pool of exactly the blocks used: a 24-token prompt + 1 token holds 7 full + 7 window
  // blocks at most.
  KvCacheManager kv(4, 15, true, 256, 0, "", {0, 8});
  Request a = MakeRequest("a", Iota(24), 4);
  int32_t max_held = 0;
  Decode(kv, a, 25, &max_held);  // the decode step frees window blocks 0..3 (still cached)
  EXPECT_EQ(kv.BlockTables("a")[1][3], BlockPool::kNullBlockId);
  kv.Free(a);
  // The free queue is now window blocks 3, 2, 1, 0 (freed when they left the window), then
  // a's tail blocks.

  // A hit at 24 tokens needs the full group's blocks 0..5 and the window group's blocks 4 and
  // 5 (a query at 24 sees 17..24).
  Request b = MakeRequest("b", Concat(Iota(24), {77}));
  ComputedBlocks hit = kv.GetComputedBlocks(b);
  EXPECT_EQ(hit.num_tokens, 24);
  ASSERT_EQ(hit.other_groups.size(), 1u);
  EXPECT_EQ(Held(hit.other_groups[0]), 2);
  EXPECT_EQ(hit.other_groups[0][3], BlockPool::kNullBlockId);

  // Evicting window blocks 3 and 2 (out of the hit's window) keeps the hit.
  Request d1 = MakeRequest("d1", Iota(4, 500));
  ASSERT_TRUE(kv.AllocateSlots(d1, 4));
  EXPECT_EQ(kv.GetComputedBlocks(b).num_tokens, 24);
  // Evicting window blocks 1, 0 and the tail 6, 5: block 5 is in the window of every hit length
  // the window group could serve, so nothing is served although the full group has all 6.
  Request d2 = MakeRequest("d2", Iota(8, 600));
  ASSERT_TRUE(kv.AllocateSlots(d2, 8));
  hit = kv.GetComputedBlocks(b);
  EXPECT_EQ(hit.num_tokens, 0);
  EXPECT_TRUE(hit.block_ids.empty());
  d1.num_computed_tokens = 4;
  d2.num_computed_tokens = 8;
  kv.Free(d1);
  kv.Free(d2);

  // A hit adopted by a new request: tables start with the null blocks, no leak on free.
  Request c = MakeRequest("c", Concat(Iota(4, 500), {1, 2, 3, 4, 5}));
  hit = kv.GetComputedBlocks(c);
  EXPECT_EQ(hit.num_tokens, 4);
  ASSERT_TRUE(kv.AllocateSlots(c, 5, hit, 0));
  c.num_computed_tokens = 9;
  kv.Free(c);
  ExpectNoLeakedBlocks(kv);
}

TEST_F(WindowKvTest, SwapKeepsTheWindowAndNullEntries) {
  Request a = MakeRequest("a", Iota(6), 200);
  int32_t max_held = 0;
  Decode(kv_, a, 40, &max_held);
  const std::vector<std::vector<int32_t>> before(kv_.BlockTables("a").begin(),
                                                 kv_.BlockTables("a").end());
  a.num_computed_tokens = 40;  // the last allocated token was computed
  auto out = kv_.SwapOut(a);
  ASSERT_TRUE(out.has_value());
  // Full group: 10 computed blocks; window group: the non-null ones among its first 10.
  EXPECT_EQ(static_cast<int32_t>(out->size()), 10 + Held(std::span(before[1]).first(10)));
  EXPECT_FALSE(kv_.HasBlocks("a"));
  a.AppendOutputToken(7);
  auto in = kv_.SwapIn(a, 1);
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->size(), out->size());
  std::span<const std::vector<int32_t>> t = kv_.BlockTables("a");
  // Null entries where the window had none, then the window (re-trimmed at 40).
  const int32_t first = (40 - 8 + 1) / 4;
  for (int32_t i = 0; i < static_cast<int32_t>(t[1].size()); ++i)
    EXPECT_EQ(t[1][i] == BlockPool::kNullBlockId, i < first);
  EXPECT_EQ(Held(t[0]), 11);
  kv_.Free(a);
}

TEST(KvCacheGroupsManagerTest, SingleFullGroupIsTheHistoricManager) {
  // Same calls, same block ids as a manager built without groups.
  KvCacheManager plain(4, 10, true, 64);
  KvCacheManager grouped(4, 10, true, 64, 0, "", {0});
  for (KvCacheManager* kv : {&plain, &grouped}) {
    Request a = MakeRequest("a", Iota(10));
    EXPECT_EQ(kv->AllocateSlots(a, 10), (Ids{1, 2, 3}));
    a.num_computed_tokens = 10;
    kv->Free(a);
    Request b = MakeRequest("b", Iota(12));
    const ComputedBlocks hit = kv->GetComputedBlocks(b);
    EXPECT_EQ(hit.block_ids, (Ids{1, 2}));
    EXPECT_TRUE(hit.other_groups.empty());
    EXPECT_EQ(kv->AllocateSlots(b, 4, hit, 0), (Ids{4}));
    b.num_computed_tokens = 12;
    kv->Free(b);
    ExpectNoLeakedBlocks(*kv);
  }
}

}  // namespace
}  // namespace pagellm
