// Gemma 2 / Gemma 3 config.json parsing: the transformers config classes' defaults, the two
// ways of naming local layers (layer_types, sliding_window_pattern), soft-caps (absent takes
// the default, null turns off), the per-layer window and RoPE choice, and the parameter count.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "model/arch_spec.h"
#include "model/config_parser.h"

namespace pagellm {
namespace {

using json = nlohmann::json;

json Base(const char* arch) {
  return {{"architectures", {arch}},  {"hidden_size", 64},
          {"intermediate_size", 128}, {"num_hidden_layers", 6},
          {"num_attention_heads", 2}, {"num_key_value_heads", 1},
          {"vocab_size", 100},        {"hidden_activation", "gelu_pytorch_tanh"}};
}

StatusOr<ModelConfig> Parse(const json& j) {
  return ParseHfConfig(j.dump(), "config.json");
}

TEST(GemmaFamilyTest, Gemma3DefaultsAndLayerPattern) {
  json j = Base("Gemma3ForCausalLM");
  j["head_dim"] = 32;
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Architecture::kGemma3);
  EXPECT_EQ(c->activation, FfnActivation::kGeluTanh);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_TRUE(c->tie_word_embeddings);  // Gemma3TextConfig's default
  EXPECT_EQ(c->rope_theta, 1e6f);
  EXPECT_EQ(c->rope_local_theta, 10000.0f);
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_EQ(c->attention_scale, 1.0f / 16.0f);  // query_pre_attn_scalar 256
  EXPECT_EQ(c->embedding_scale, 8.0f);          // sqrt(64)
  EXPECT_EQ(c->attn_logit_softcap, 0.0f);
  EXPECT_EQ(c->final_logit_softcap, 0.0f);
  // Every 6th layer is global.
  for (int l = 0; l < 6; ++l) {
    EXPECT_EQ(c->LayerWindow(l), l == 5 ? 0 : 4096) << l;
    EXPECT_EQ(c->LayerUsesLocalRope(l), l != 5) << l;
  }
  // layer_types wins over the pattern; query_pre_attn_scalar and the local base are read.
  j["layer_types"] = {"full_attention",    "sliding_attention", "full_attention",
                      "sliding_attention", "sliding_attention", "full_attention"};
  j["sliding_window_pattern"] = 6;
  j["query_pre_attn_scalar"] = 64;
  j["rope_local_base_freq"] = 5000.0;
  j["sliding_window"] = 512;
  c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->sliding_layers, (std::vector<uint8_t>{0, 1, 0, 1, 1, 0}));
  EXPECT_EQ(c->LayerWindow(1), 512);
  EXPECT_EQ(c->AttentionScale(), 0.125f);
  EXPECT_EQ(c->rope_local_theta, 5000.0f);
  EXPECT_EQ(c->rope_local_params().theta, 5000.0f);
  EXPECT_EQ(c->rope_local_params().scaling.type, RopeScalingType::kNone);
  j["sliding_window_pattern"] = 2;
  j.erase("layer_types");
  c = Parse(j);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sliding_layers, (std::vector<uint8_t>{1, 0, 1, 0, 1, 0}));
}

TEST(GemmaFamilyTest, Gemma2SoftCapsAndAlternation) {
  json j = Base("Gemma2ForCausalLM");
  j["hidden_act"] = "gelu_pytorch_tanh";
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Architecture::kGemma2);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->head_dim, 256);  // Gemma2Config's default, not hidden / heads
  EXPECT_EQ(c->rope_theta, 10000.0f);
  EXPECT_EQ(c->rope_local_theta, 0.0f);
  EXPECT_EQ(c->attn_logit_softcap, 50.0f);
  EXPECT_EQ(c->final_logit_softcap, 30.0f);
  EXPECT_EQ(c->sliding_layers, (std::vector<uint8_t>{1, 0, 1, 0, 1, 0}));
  for (int l = 0; l < 6; ++l) EXPECT_FALSE(c->LayerUsesLocalRope(l));
  j["attn_logit_softcapping"] = nullptr;
  j["final_logit_softcapping"] = 12.5;
  c = Parse(j);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->attn_logit_softcap, 0.0f);
  EXPECT_EQ(c->final_logit_softcap, 12.5f);
}

TEST(GemmaFamilyTest, BadFieldsAreErrors) {
  json j = Base("Gemma3ForCausalLM");
  j["hidden_activation"] = "silu";
  EXPECT_EQ(Parse(j).status().code(), StatusCode::kUnimplemented);
  j = Base("Gemma3ForCausalLM");
  j["layer_types"] = {"full_attention"};
  EXPECT_FALSE(Parse(j).ok());
  j["layer_types"] = {"a", "b", "c", "d", "e", "f"};
  EXPECT_FALSE(Parse(j).ok());
  j = Base("Gemma3ForCausalLM");
  j["query_pre_attn_scalar"] = 0;
  EXPECT_FALSE(Parse(j).ok());
  j = Base("Gemma2ForCausalLM");
  j["final_logit_softcapping"] = -1.0;
  EXPECT_FALSE(Parse(j).ok());
  j = Base("Gemma3ForCausalLM");
  j["sliding_window_pattern"] = 0;
  EXPECT_FALSE(Parse(j).ok());
  // Layer counts are checked before the per-layer tables are sized.
  for (int layers : {-1, 0, 1 << 30}) {
    j = Base("Gemma2ForCausalLM");
    j["num_hidden_layers"] = layers;
    EXPECT_EQ(Parse(j).status().code(), StatusCode::kInvalidArgument) << layers;
  }
  // A Llama config naming a GELU is still refused.
  j = Base("LlamaForCausalLM");
  EXPECT_EQ(Parse(j).status().code(), StatusCode::kUnimplemented);
}

TEST(GemmaFamilyTest, ParameterCount) {
  json j = Base("Gemma3ForCausalLM");
  j["head_dim"] = 32;
  auto c = Parse(j);
  ASSERT_TRUE(c.ok());
  const ShardDims full{c->q_dim(), c->kv_dim(), c->intermediate_size, c->vocab_size};
  // q, o 64x64; k, v 32x64; four norms; q/k norms 2x32; gate, up, down 128x64.
  const int64_t layer = 2 * 64 * 64 + 2 * 32 * 64 + 4 * 64 + 2 * 32 + 3 * 128 * 64;
  EXPECT_EQ(GetArchSpec(Architecture::kGemma3).count_parameters(*c, full),
            100 * 64 + 6 * layer + 64);
}

}  // namespace
}  // namespace pagellm
