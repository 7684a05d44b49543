// Each rank's ranges under the Megatron split, written out by hand (vLLM's rules: heads divide
// evenly, KV heads replicated when there are fewer than ranks; ceil shares of the rest).
#include <gtest/gtest.h>

#include "model/tensor_parallel_shard.h"

namespace pagellm {
namespace {

ModelConfig Config(int heads, int kv_heads, int inter, int vocab) {
  ModelConfig c;
  c.hidden_size = 64;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = 16;
  c.intermediate_size = inter;
  c.vocab_size = vocab;
  return c;
}

TEST(ShardLayout, SplitsHeadsColumnsAndVocabulary) {
  const ModelConfig c = Config(32, 8, 8192, 128256);
  const int q_begin[] = {0, 8, 16, 24}, kv_begin[] = {0, 2, 4, 6};
  for (int r = 0; r < 4; ++r) {
    auto l = ComputeShardLayout(c, r, 4);
    ASSERT_TRUE(l.ok());
    EXPECT_EQ(l->q_head_begin, q_begin[r]);
    EXPECT_EQ(l->num_q_heads, 8);
    EXPECT_EQ(l->kv_head_begin, kv_begin[r]);
    EXPECT_EQ(l->num_kv_heads, 2);
    EXPECT_EQ(l->inter_begin, 2048 * r);
    EXPECT_EQ(l->inter, 2048);
    EXPECT_EQ(l->vocab_begin, 32064 * r);
    EXPECT_EQ(l->vocab, 32064);
  }
}

TEST(ShardLayout, ReplicatesKvHeadsAndSplitsUnevenVocabulary) {
  // 8 query heads over 2 KV heads (groups of 4) on 4 ranks: ranks 0-1 read KV head 0, ranks 2-3
  // KV head 1. Vocabulary 105 in shares of 27: 27, 27, 27, 24.
  const ModelConfig c = Config(8, 2, 352, 105);
  const int kv_begin[] = {0, 0, 1, 1};
  const int64_t vocab_begin[] = {0, 27, 54, 81}, vocab[] = {27, 27, 27, 24};
  for (int r = 0; r < 4; ++r) {
    auto l = ComputeShardLayout(c, r, 4);
    ASSERT_TRUE(l.ok());
    EXPECT_EQ(l->q_head_begin, 2 * r);
    EXPECT_EQ(l->num_q_heads, 2);
    EXPECT_EQ(l->kv_head_begin, kv_begin[r]);
    EXPECT_EQ(l->num_kv_heads, 1);
    EXPECT_EQ(l->inter_begin, 88 * r);
    EXPECT_EQ(l->inter, 88);
    EXPECT_EQ(l->vocab_begin, vocab_begin[r]);
    EXPECT_EQ(l->vocab, vocab[r]);
  }
}

TEST(ShardLayout, RefusesSplitsThatDoNotDivide) {
  EXPECT_EQ(ComputeShardLayout(Config(8, 4, 64, 64), 0, 3).status().code(),
            StatusCode::kInvalidArgument);  // 8 heads over 3
  EXPECT_EQ(ComputeShardLayout(Config(12, 6, 64, 64), 0, 4).status().code(),
            StatusCode::kInvalidArgument);  // 6 KV heads neither split nor replicated over 4
  EXPECT_EQ(ComputeShardLayout(Config(8, 4, 64, 64), 2, 2).status().code(),
            StatusCode::kInvalidArgument);  // no rank 2 in a group of 2
  EXPECT_EQ(ComputeShardLayout(Config(8, 8, 64, 3), 3, 4).status().code(),
            StatusCode::kInvalidArgument);  // vocabulary 3: rank 3 would hold nothing
}

}  // namespace
}  // namespace pagellm
