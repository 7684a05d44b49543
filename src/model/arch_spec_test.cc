#include "model/arch_spec.h"

#include <gtest/gtest.h>

#include "model/decoder_graph.h"

namespace pagellm {
namespace {

TEST(ArchSpecTest, EveryArchitectureHasOneCompleteRow) {
  for (Architecture a : {Architecture::kLlama, Architecture::kMistral, Architecture::kQwen2,
                         Architecture::kQwen3, Architecture::kMixtral, Architecture::kQwen2Moe,
                         Architecture::kQwen3Moe, Architecture::kGemma2, Architecture::kGemma3}) {
    const ArchSpec& s = GetArchSpec(a);
    EXPECT_EQ(s.arch, a);
    EXPECT_EQ(FindArchByHfName(s.hf_name), &s);
    if (s.gguf_name != nullptr) {
      EXPECT_EQ(FindArchByGgufName(s.gguf_name, s.moe), &s);
    }
    EXPECT_EQ(s.moe, s.hf_tensors->moe != nullptr);
    EXPECT_EQ(s.moe, s.gguf_tensors->moe != nullptr);
    EXPECT_NE(s.parse_hf_fields, nullptr);
    EXPECT_NE(s.hf_tensors, nullptr);
    EXPECT_NE(s.gguf_tensors, nullptr);
    EXPECT_NE(s.bind_weights, nullptr);
    EXPECT_NE(s.count_parameters, nullptr);
    EXPECT_NE(s.activation_floats, nullptr);
    EXPECT_NE(s.forward, nullptr);
  }
  EXPECT_EQ(FindArchByHfName("GPT2LMHeadModel"), nullptr);
  EXPECT_EQ(FindArchByGgufName("gpt2"), nullptr);
  // A "llama" GGUF with experts is Mixtral; without, Llama.
  EXPECT_EQ(FindArchByGgufName("llama", true)->arch, Architecture::kMixtral);
  EXPECT_EQ(FindArchByGgufName("llama", false)->arch, Architecture::kLlama);
  EXPECT_EQ(SupportedArchitecturesList(),
            "LlamaForCausalLM (Llama 1/2/3, SmolLM), MistralForCausalLM, Qwen2ForCausalLM, "
            "Qwen3ForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, "
            "Gemma2ForCausalLM, Gemma3ForCausalLM");
  EXPECT_EQ(SupportedGgufArchitecturesList(),
            "llama, qwen2, qwen3, qwen2moe, qwen3moe, gemma2, gemma3");
}

TEST(ArchSpecTest, LlamaFamilyCountsAndSizing) {
  ModelConfig c;
  c.arch = Architecture::kQwen2;
  c.hidden_size = 64;
  c.intermediate_size = 172;
  c.num_layers = 5;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 8;
  c.vocab_size = 512;
  c.attention_bias = true;
  c.tie_word_embeddings = false;
  const ArchSpec& s = GetArchSpec(c.arch);
  const ShardDims full{c.q_dim(), c.kv_dim(), c.intermediate_size, c.vocab_size};
  // Per layer: q,o 64x64; k,v 32x64; gate,up,down 172x64; two norms; q/k/v biases.
  const int64_t layer = 2 * 64 * 64 + 2 * 32 * 64 + 3 * 172 * 64 + 2 * 64 + (64 + 2 * 32);
  EXPECT_EQ(s.count_parameters(c, full), 2 * 512 * 64 + 5 * layer + 64);
  EXPECT_EQ(s.activation_floats(c, 10, 2), DecoderActivationFloats(c, 10, 2));
  EXPECT_EQ(DecoderActivationFloats(c, 10, 2),
            10 * (3 * 64 + 2 * 64 + 2 * 32 + 2 * 172) + 2 * (64 + 512));
}

// Qwen3-MoE: q/k norms; layer 1 dense (mlp_only_layers), layers 0 and 2 sparse.
TEST(ArchSpecTest, MoeCountsAndSparseLayers) {
  ModelConfig c;
  c.arch = Architecture::kQwen3Moe;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_layers = 3;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.vocab_size = 100;
  c.qk_norm = true;
  c.moe.num_experts = 8;
  c.moe.num_experts_per_tok = 2;
  c.moe.expert_intermediate = 16;
  c.moe.mlp_only_layers = {1};
  c.max_position_embeddings = 64;
  ASSERT_TRUE(c.Validate().ok()) << c.Validate().ToString();
  EXPECT_TRUE(c.moe.IsSparseLayer(0));
  EXPECT_FALSE(c.moe.IsSparseLayer(1));
  EXPECT_TRUE(c.moe.IsSparseLayer(2));
  c.moe.decoder_sparse_step = 2;
  EXPECT_FALSE(c.moe.IsSparseLayer(0));
  EXPECT_FALSE(c.moe.IsSparseLayer(1));
  EXPECT_FALSE(c.moe.IsSparseLayer(2));
  c.moe.decoder_sparse_step = 1;
  const ShardDims full{c.q_dim(), c.kv_dim(), c.intermediate_size, c.vocab_size};
  const int64_t attn = 2 * 128 * 64 + 2 * 64 * 64 + 2 * 64 + 2 * 32;
  const int64_t sparse = 8 * 64 + 8 * 3 * 16 * 64;  // router, experts
  const int64_t dense = 3 * 96 * 64;
  EXPECT_EQ(GetArchSpec(c.arch).count_parameters(c, full),
            2 * 100 * 64 + 3 * attn + 2 * sparse + dense + 64);
  c.moe.num_experts_per_tok = 9;
  EXPECT_FALSE(c.Validate().ok());
}

}  // namespace
}  // namespace pagellm
