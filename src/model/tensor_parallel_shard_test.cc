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
  // Vocabulary 3: rank 3 would hold nothing, which every rank of the group reports.
  for (int r = 0; r < 4; ++r) {
    auto none = ComputeShardLayout(Config(8, 8, 64, 3), r, 4);
    EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(none.status().message().find("leaves rank 3 no MLP columns or vocabulary rows"),
              std::string::npos)
        << none.status().message();
  }
}

// Qwen3-30B-A3B's widths: every expert's 768 columns and (Qwen2-MoE) a shared expert's 5632 split
// in ceil shares like the dense MLP; a width that leaves a rank nothing is an error.
TEST(ShardLayout, SplitsEveryExpertAndTheSharedExpert) {
  ModelConfig c = Config(32, 4, 6144, 151936);
  c.moe.num_experts = 128;
  c.moe.num_experts_per_tok = 8;
  c.moe.expert_intermediate = 768;
  c.moe.shared_expert_intermediate = 5632;
  for (int r = 0; r < 4; ++r) {
    auto l = ComputeShardLayout(c, r, 4);
    ASSERT_TRUE(l.ok());
    EXPECT_EQ(l->expert_inter_begin, 192 * r);
    EXPECT_EQ(l->expert_inter, 192);
    EXPECT_EQ(l->shared_inter_begin, 1408 * r);
    EXPECT_EQ(l->shared_inter, 1408);
  }
  c.moe.shared_expert_intermediate = 0;
  auto dense_only = ComputeShardLayout(c, 1, 2);
  ASSERT_TRUE(dense_only.ok());
  EXPECT_EQ(dense_only->shared_inter, 0);
  c.moe.expert_intermediate = 3;  // shares of 1: rank 3 would hold none of each expert
  for (int r : {0, 3}) {
    auto none = ComputeShardLayout(c, r, 4);
    EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(none.status().message().find("leaves rank 3 none of each expert"), std::string::npos)
        << none.status().message();
  }
}

}  // namespace
}  // namespace pagellm
