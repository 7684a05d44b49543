// The planner with KV cache groups (kv/kv_cache_groups.h): sliding-window layers are counted
// by their window, so a long Gemma 3 request holds window-sized KV in its local layers.
#include <gtest/gtest.h>

#include "kv/kv_cache_groups.h"
#include "planner/memory_planner.h"

namespace pagellm {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// Gemma-3-1B's attention shapes (config.json): 26 layers, every sixth global, the others with
// a 512-token window; one KV head of 256.
ModelConfig Gemma3_1B() {
  ModelConfig c;
  c.hf_architecture = "Gemma3ForCausalLM";
  c.hidden_size = 1152;
  c.intermediate_size = 6912;
  c.num_layers = 26;
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.head_dim = 256;
  c.vocab_size = 262144;
  c.max_position_embeddings = 32768;
  c.weight_dtype = DType::kBF16;
  c.sliding_window = 512;
  c.sliding_layers.assign(26, 1);
  for (int l = 5; l < 26; l += 6) c.sliding_layers[l] = 0;
  return c;
}

PlanInput Gemma3Input(bool grouped) {
  PlanInput in;
  in.model = Gemma3_1B();
  in.device_name = "test";
  in.device_memory_bytes = 8 * kGiB;
  StatusOr<KvElementFormat> f = ResolveKvElementFormat(KvCacheDtype::kBFloat16, 16);
  EXPECT_TRUE(f.ok());
  in.kv_format = *f;
  in.block_size = 16;
  in.max_model_len = 32768;
  in.kv_cache_memory_bytes = kGiB;
  if (grouped) {
    const KvCacheGroups g = CpuKvCacheGroups(in.model, in.kv_format, true);
    in.kv_group_windows = g.windows();
    in.kv_layers_per_group = g.layers_per_group;
  }
  return in;
}

TEST(SlidingWindowPlanTest, Gemma3LocalLayersHoldOnlyTheirWindow) {
  StatusOr<MemoryPlan> full = ComputeMemoryPlan(Gemma3Input(false));
  StatusOr<MemoryPlan> grouped = ComputeMemoryPlan(Gemma3Input(true));
  ASSERT_TRUE(full.ok() && grouped.ok());
  // Full layout: a block is 26 layers x 2 (K, V) x 256 x 2 bytes x 16 tokens.
  EXPECT_EQ(full->kv_bytes_per_block, 26 * 2 * 256 * 2 * 16);
  EXPECT_EQ(full->blocks_per_request, 2048);
  EXPECT_EQ(full->num_blocks, kGiB / (26 * 2 * 256 * 2 * 16));  // 2520
  // Groups of 2 layers: 2 global groups of 2048 blocks and 11 local ones of 512/16 + 1.
  EXPECT_EQ(grouped->kv_bytes_per_block, 2 * 2 * 256 * 2 * 16);
  EXPECT_EQ(grouped->blocks_per_request, 2 * 2048 + 11 * 33);
  EXPECT_EQ(grouped->num_blocks, kGiB / (2 * 2 * 256 * 2 * 16));  // 32768
  EXPECT_EQ(grouped->kv_bytes_per_request, (2 * 2048 + 11 * 33) * int64_t{2 * 2 * 256 * 2 * 16});
  EXPECT_DOUBLE_EQ(grouped->max_concurrency, 32768.0 / (2 * 2048 + 11 * 33));
  // Global layers x L + local layers x (window + a block): ~6x the requests of the full cache.
  EXPECT_GT(grouped->max_concurrency, 5.9 * full->max_concurrency);
  EXPECT_TRUE(grouped->fits);
}

TEST(SlidingWindowPlanTest, LargestFittingLengthCountsWindows) {
  PlanInput in = Gemma3Input(true);
  in.kv_cache_memory_bytes = 100 * in.block_size * int64_t{2 * 2 * 256 * 2};  // 100 blocks
  StatusOr<MemoryPlan> p = ComputeMemoryPlan(in);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->num_blocks, 100);
  EXPECT_FALSE(p->fits);
  // 13 groups share 100 blocks: up to 7 blocks each (112 tokens) every group holds all; beyond
  // the window the local groups stop growing, so only the 2 global groups grow:
  // 2 x ceil(L / 16) + 11 x min(ceil(L / 16), 33) <= 100 holds up to L = 7 x 16 = 112.
  EXPECT_EQ(p->max_model_len_that_fits, 112);
  EXPECT_LE(BlocksPerRequest(in.kv_group_windows, 16, 112), 100);
  EXPECT_GT(BlocksPerRequest(in.kv_group_windows, 16, 113), 100);
  EXPECT_FALSE(CheckPlanFits(*p).ok());
}

TEST(SlidingWindowPlanTest, NoWindowOrSkipLayersIsOneGroup) {
  ModelConfig c = Gemma3_1B();
  StatusOr<KvElementFormat> f = ResolveKvElementFormat(KvCacheDtype::kBFloat16, 16);
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(CpuKvCacheGroups(c, *f, true).is_single_full());
  EXPECT_TRUE(CpuKvCacheGroups(c, *f, false).is_single_full());
  KvElementFormat skip = *f;
  skip.skip_layers = {0};
  EXPECT_TRUE(CpuKvCacheGroups(c, skip, true).is_single_full());
  c.sliding_window = 0;
  EXPECT_TRUE(CpuKvCacheGroups(c, *f, true).is_single_full());
}

}  // namespace
}  // namespace pagellm
