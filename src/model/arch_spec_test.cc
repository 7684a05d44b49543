#include "model/arch_spec.h"

#include <gtest/gtest.h>

#include "model/decoder_graph.h"

namespace pagellm {
namespace {

TEST(ArchSpecTest, EveryArchitectureHasOneCompleteRow) {
  for (Architecture a : {Architecture::kLlama, Architecture::kMistral, Architecture::kQwen2}) {
    const ArchSpec& s = GetArchSpec(a);
    EXPECT_EQ(s.arch, a);
    EXPECT_EQ(FindArchByHfName(s.hf_name), &s);
    if (s.gguf_name != nullptr) {
      EXPECT_EQ(FindArchByGgufName(s.gguf_name), &s);
    }
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
  EXPECT_EQ(SupportedArchitecturesList(),
            "LlamaForCausalLM (Llama 1/2/3, SmolLM), MistralForCausalLM, Qwen2ForCausalLM");
  EXPECT_EQ(SupportedGgufArchitecturesList(), "llama, qwen2");
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

}  // namespace
}  // namespace pagellm
