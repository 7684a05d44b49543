// Loading the Qwen3 and mixture-of-experts families from synthetic files: config fields and
// their defaults, a Mixtral GGUF (a "llama" file with experts), stacked expert tensors split
// into one matrix per expert, Qwen2-MoE's shared expert, and the errors bad files get.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "model/config_parser.h"
#include "model/gguf_file.h"
#include "model/model_weights.h"
#include "model/moe_family.h"
#include "model/test_file_writers.h"

namespace pagellm {
namespace {

using nlohmann::json;
using testing::GgufBuilder;

template <typename T>
void ExpectError(const StatusOr<T>& r, StatusCode code, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  for (const std::string& p : parts) {
    EXPECT_NE(r.status().message().find(p), std::string::npos)
        << "'" << p << "' not in: " << r.status().message();
  }
}

json BaseConfig(const char* arch) {
  return {{"architectures", {arch}},  {"hidden_size", 32},
          {"intermediate_size", 64},  {"num_hidden_layers", 3},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"vocab_size", 64},         {"head_dim", 16}};
}

// Declares `name` as a reference to the value of the StatusOr `expr`, failing the test if it is
// an error.
#define ASSIGN_OK(name, expr)                                   \
  auto name##_or = (expr);                                      \
  ASSERT_TRUE(name##_or.ok()) << name##_or.status().ToString(); \
  auto& name = *name##_or

StatusOr<ModelConfig> Hf(const json& j) {
  return ParseHfConfig(j.dump(), "cfg/config.json");
}

TEST(MoeConfig, HfFieldsAndDefaults) {
  ASSIGN_OK(q3, Hf(BaseConfig("Qwen3ForCausalLM")));
  EXPECT_EQ(q3.arch, Architecture::kQwen3);
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_FALSE(q3.attention_bias);
  EXPECT_EQ(q3.head_dim, 16);  // independent of hidden / heads (8)
  json no_head_dim = BaseConfig("Qwen3ForCausalLM");
  no_head_dim.erase("head_dim");
  ASSIGN_OK(q3d, Hf(no_head_dim));
  EXPECT_EQ(q3d.head_dim, 128);  // Qwen3Config's default

  ASSIGN_OK(mx, Hf(BaseConfig("MixtralForCausalLM")));
  EXPECT_EQ(mx.moe.num_experts, 8);
  EXPECT_EQ(mx.moe.num_experts_per_tok, 2);
  EXPECT_EQ(mx.moe.expert_intermediate, 64);
  EXPECT_TRUE(mx.moe.norm_topk_prob);
  EXPECT_EQ(mx.sliding_window, 0);

  json j = BaseConfig("Qwen3MoeForCausalLM");
  j["num_experts"] = 16;
  j["num_experts_per_tok"] = 4;
  j["moe_intermediate_size"] = 24;
  j["norm_topk_prob"] = true;
  j["mlp_only_layers"] = {1};
  ASSIGN_OK(q3m, Hf(j));
  EXPECT_EQ(q3m.arch, Architecture::kQwen3Moe);
  EXPECT_TRUE(q3m.qk_norm);
  EXPECT_EQ(q3m.moe.num_experts, 16);
  EXPECT_EQ(q3m.moe.expert_intermediate, 24);
  EXPECT_TRUE(q3m.moe.IsSparseLayer(0));
  EXPECT_FALSE(q3m.moe.IsSparseLayer(1));

  ASSIGN_OK(q2m, Hf(BaseConfig("Qwen2MoeForCausalLM")));
  EXPECT_TRUE(q2m.attention_bias);
  EXPECT_EQ(q2m.moe.num_experts, 60);
  EXPECT_EQ(q2m.moe.num_experts_per_tok, 4);
  EXPECT_EQ(q2m.moe.shared_expert_intermediate, 5632);
  EXPECT_FALSE(q2m.moe.norm_topk_prob);
}

TEST(MoeConfig, HfBadFields) {
  json j = BaseConfig("Qwen3MoeForCausalLM");
  j["num_experts"] = 4;
  j["num_experts_per_tok"] = 5;
  ExpectError(Hf(j), StatusCode::kInvalidArgument, {"cfg/config.json", "num_experts_per_tok"});
  j["num_experts_per_tok"] = 2;
  j["mlp_only_layers"] = "1";
  ExpectError(Hf(j), StatusCode::kInvalidArgument, {"'mlp_only_layers'"});
  j["mlp_only_layers"] = {1};
  j["decoder_sparse_step"] = 0;
  ExpectError(Hf(j), StatusCode::kInvalidArgument, {"decoder_sparse_step"});
  json q3 = BaseConfig("Qwen3ForCausalLM");
  q3["attention_bias"] = true;
  ExpectError(Hf(q3), StatusCode::kUnimplemented, {"attention_bias"});
}

// A two-layer MoE GGUF: hidden 32, 4 heads of 8 (2 KV), 4 experts of width 16, 2 per token.
struct MoeGgufSpec {
  std::string arch = "llama";
  int experts = 4;
  int used = 2;
  int stacked_experts = 4;  // experts in the stacked tensors (a mismatch is an error)
  bool qk_norm = false;
  bool shared = false;
  bool write_used = true;
};

GgufBuilder MoeGguf(const MoeGgufSpec& s) {
  GgufBuilder b;
  const std::string& a = s.arch;
  b.AddString("general.architecture", a);
  b.AddU32(a + ".embedding_length", 32);
  b.AddU32(a + ".feed_forward_length", 48);
  b.AddU32(a + ".block_count", 2);
  b.AddU32(a + ".attention.head_count", 4);
  b.AddU32(a + ".attention.head_count_kv", 2);
  b.AddU32(a + ".context_length", 128);
  if (s.experts > 0) b.AddU32(a + ".expert_count", s.experts);
  if (s.write_used) b.AddU32(a + ".expert_used_count", s.used);
  b.AddU32(a + ".expert_feed_forward_length", 16);
  if (s.shared) b.AddU32(a + ".expert_shared_feed_forward_length", 24);
  b.AddU32(a + ".vocab_size", 64);
  const uint64_t e = s.stacked_experts;
  b.AddTensor("token_embd.weight", {32, 64}, testing::kGgmlF32);
  for (int i = 0; i < 2; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    b.AddTensor(p + "attn_norm.weight", {32}, testing::kGgmlF32);
    b.AddTensor(p + "attn_q.weight", {32, 32}, testing::kGgmlF32);
    b.AddTensor(p + "attn_k.weight", {32, 16}, testing::kGgmlF32);
    b.AddTensor(p + "attn_v.weight", {32, 16}, testing::kGgmlF32);
    if (s.arch == "qwen2moe") {
      b.AddTensor(p + "attn_q.bias", {32}, testing::kGgmlF32);
      b.AddTensor(p + "attn_k.bias", {16}, testing::kGgmlF32);
      b.AddTensor(p + "attn_v.bias", {16}, testing::kGgmlF32);
    }
    if (s.qk_norm) {
      b.AddTensor(p + "attn_q_norm.weight", {8}, testing::kGgmlF32);
      b.AddTensor(p + "attn_k_norm.weight", {8}, testing::kGgmlF32);
    }
    b.AddTensor(p + "attn_output.weight", {32, 32}, testing::kGgmlF32);
    b.AddTensor(p + "ffn_norm.weight", {32}, testing::kGgmlF32);
    if (s.experts == 0) continue;  // a dense file without its dense FFN
    b.AddTensor(p + "ffn_gate_inp.weight", {32, static_cast<uint64_t>(s.experts)},
                testing::kGgmlF32);
    b.AddTensor(p + "ffn_gate_exps.weight", {32, 16, e}, testing::kGgmlQ8_0);
    b.AddTensor(p + "ffn_up_exps.weight", {32, 16, e}, testing::kGgmlQ8_0);
    b.AddTensor(p + "ffn_down_exps.weight", {16, 32, e}, testing::kGgmlF16);
    if (s.shared) {
      b.AddTensor(p + "ffn_gate_shexp.weight", {32, 24}, testing::kGgmlF32);
      b.AddTensor(p + "ffn_up_shexp.weight", {32, 24}, testing::kGgmlF32);
      b.AddTensor(p + "ffn_down_shexp.weight", {24, 32}, testing::kGgmlF32);
      b.AddTensor(p + "ffn_gate_inp_shexp.weight", {32}, testing::kGgmlF32);
    }
  }
  b.AddTensor("output_norm.weight", {32}, testing::kGgmlF32);
  return b;
}

StatusOr<std::unique_ptr<LoadedModel>> Load(const MoeGgufSpec& s, std::vector<uint8_t>* storage) {
  const std::string bytes = MoeGguf(s).Build();
  storage->assign(bytes.begin(), bytes.end());
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> g,
                   GgufFile::Parse(storage->data(), storage->size(), "moe.gguf"));
  return LoadGgufModel(std::move(g));
}

TEST(MoeGguf, MixtralIsALlamaFileWithExperts) {
  std::vector<uint8_t> storage;
  ASSIGN_OK(m, Load({}, &storage));
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.arch, Architecture::kMixtral);
  EXPECT_TRUE(c.rope_interleaved);
  EXPECT_EQ(c.moe.num_experts, 4);
  EXPECT_EQ(c.moe.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe.expert_intermediate, 16);
  EXPECT_TRUE(c.moe.norm_topk_prob);
  for (const LayerWeights& l : m->weights.layers) {
    EXPECT_EQ(l.w_gate.rows, 0);  // sparse: no dense FFN
    EXPECT_EQ(l.moe.router.rows, 4);
    ASSERT_EQ(l.moe.gate.size(), 4u);
    ASSERT_EQ(l.moe.down.size(), 4u);
    // Expert e is the e-th [rows][cols] slice of the stacked tensor, in its stored dtype.
    for (int e = 1; e < 4; ++e) {
      EXPECT_EQ(l.moe.gate[e].dtype, DType::kQ8_0);
      EXPECT_EQ(l.moe.gate[e].rows, 16);
      EXPECT_EQ(l.moe.gate[e].cols, 32);
      EXPECT_EQ(l.moe.gate[e].data, l.moe.gate[0].data + e * l.moe.gate[0].nbytes());
      EXPECT_EQ(l.moe.down[e].dtype, DType::kF16);
      EXPECT_EQ(l.moe.down[e].data, l.moe.down[0].data + e * 32 * 16 * 2);
    }
  }
  // Every stored element is a parameter; a token reads the router and 2 of the 4 experts.
  const int64_t experts = 4 * 3 * 16 * 32;
  EXPECT_EQ(m->weights.num_parameters, CountActiveParameters(c) + 2 * (experts / 2));
  // A "llama" file without experts is Llama (and needs its dense FFN).
  MoeGgufSpec dense_name;
  dense_name.experts = 0;
  ExpectError(Load(dense_name, &storage), StatusCode::kNotFound,
              {"moe.gguf", "missing tensor 'blk.0.ffn_gate.weight'"});
}

TEST(MoeGguf, Qwen3MoeAndQwen2MoeSharedExpert) {
  std::vector<uint8_t> storage;
  MoeGgufSpec q3;
  q3.arch = "qwen3moe";
  q3.qk_norm = true;
  ASSIGN_OK(m3, Load(q3, &storage));
  EXPECT_EQ(m3->config.arch, Architecture::kQwen3Moe);
  EXPECT_FALSE(m3->config.rope_interleaved);
  EXPECT_TRUE(m3->config.moe.norm_topk_prob);
  EXPECT_EQ(m3->weights.layers[1].q_norm.size(), 8u);

  std::vector<uint8_t> storage2;
  MoeGgufSpec q2;
  q2.arch = "qwen2moe";
  q2.shared = true;
  ASSIGN_OK(m2, Load(q2, &storage2));
  EXPECT_EQ(m2->config.arch, Architecture::kQwen2Moe);
  EXPECT_FALSE(m2->config.moe.norm_topk_prob);  // llama.cpp's Qwen2-MoE default
  EXPECT_EQ(m2->config.moe.shared_expert_intermediate, 24);
  EXPECT_EQ(m2->weights.layers[0].moe.shared_expert_gate.size(), 32u);
  EXPECT_EQ(m2->weights.layers[0].moe.shared_down.cols, 24);
}

TEST(MoeGguf, BadFiles) {
  std::vector<uint8_t> storage;
  MoeGgufSpec too_many;
  too_many.used = 5;
  ExpectError(Load(too_many, &storage), StatusCode::kInvalidArgument,
              {"moe.gguf", "num_experts_per_tok"});
  MoeGgufSpec no_used;
  no_used.write_used = false;
  ExpectError(Load(no_used, &storage), StatusCode::kNotFound, {"llama.expert_used_count"});
  MoeGgufSpec short_stack;
  short_stack.stacked_experts = 3;
  ExpectError(Load(short_stack, &storage), StatusCode::kInvalidArgument,
              {"'blk.0.ffn_gate_exps.weight'", "expected shape [4, 16, 32], got [3, 16, 32]"});
  MoeGgufSpec no_norm;
  no_norm.arch = "qwen3moe";
  ExpectError(Load(no_norm, &storage), StatusCode::kNotFound,
              {"missing tensor 'blk.0.attn_q_norm.weight'"});
  MoeGgufSpec no_shared;
  no_shared.arch = "qwen2moe";
  ExpectError(Load(no_shared, &storage), StatusCode::kNotFound,
              {"missing tensor 'blk.0.ffn_gate_shexp.weight'"});
}

}  // namespace
}  // namespace pagellm
