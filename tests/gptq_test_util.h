// A synthetic GPTQ checkpoint in Hugging Face layout (AutoGPTQ / GPTQModel, "gptq" v1 zero
// points), written from the format's definition (kernels/hf_quant_scheme.h): every linear layer
// quantized with random codes, zero points and scales; act-order g_idx (a random permutation of
// the inputs, `group` of them per group) shared by the modules that read the same input, as a
// real checkpoint's; embeddings, norms and lm_head float.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "model/test_file_writers.h"

namespace pagellm::testing {

struct GptqSpec {
  TinyModelSpec model;
  int bits = 4;    // 4 or 8
  int group = 32;  // inputs per group
  bool act_order = true;
  uint32_t seed = 1;
};

namespace gptq_internal {

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// g_idx of `in` inputs: groups of `group` consecutive inputs, or of a random permutation's.
inline std::vector<int32_t> GroupIndex(std::mt19937& rng, int64_t in, int group, bool act_order) {
  std::vector<int32_t> order(in);
  std::iota(order.begin(), order.end(), 0);
  if (act_order) std::shuffle(order.begin(), order.end(), rng);
  std::vector<int32_t> g_idx(in);
  for (int64_t i = 0; i < in; ++i) g_idx[order[i]] = static_cast<int32_t>(i / group);
  return g_idx;
}

// qweight, qzeros, scales and g_idx of an [out][in] module.
inline void AddModule(SafetensorsBuilder& b, std::mt19937& rng, const std::string& module,
                      int64_t out, int64_t in, const GptqSpec& s,
                      const std::vector<int32_t>& g_idx) {
  const int p = 32 / s.bits;
  const int64_t groups = in / s.group;
  const uint32_t max_code = (1u << s.bits) - 1;
  std::uniform_int_distribution<uint32_t> code(0, max_code);
  // Stored zero points (v1: the file holds z - 1) around the middle of the code range; 8-bit
  // ones symmetric (z = 128), so that q - z fits int8 and the matrix repacks to Q8_0.
  std::uniform_int_distribution<uint32_t> zero(s.bits == 4 ? 5 : 127, s.bits == 4 ? 8 : 127);
  std::uniform_real_distribution<float> scale(0.6f, 1.4f);
  // Weights of standard deviation about 1 / sqrt(in) (codes minus zero: ~4.6 and ~74).
  const float base = (s.bits == 4 ? 0.22f : 0.0135f) / std::sqrt(static_cast<float>(in));
  std::vector<int32_t> qweight(in / p * out, 0), qzeros(groups * out / p, 0);
  std::vector<uint16_t> scales(groups * out);
  for (int64_t k = 0; k < in; ++k)
    for (int64_t o = 0; o < out; ++o)
      qweight[(k / p) * out + o] |= static_cast<int32_t>(code(rng) << (s.bits * (k % p)));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t o = 0; o < out; ++o) {
      qzeros[g * (out / p) + o / p] |= static_cast<int32_t>(zero(rng) << (s.bits * (o % p)));
      scales[g * out + o] = F32ToF16(base * scale(rng));
    }
  b.Add(module + ".qweight", "I32", {in / p, out}, Bytes(qweight));
  b.Add(module + ".qzeros", "I32", {groups, out / p}, Bytes(qzeros));
  b.Add(module + ".scales", "F16", {groups, out}, Bytes(scales));
  b.Add(module + ".g_idx", "I32", {in}, Bytes(g_idx));
}

}  // namespace gptq_internal

// Writes config.json (with its quantization_config) and model.safetensors into `dir`.
inline void WriteGptqModel(const TempDir& dir, const GptqSpec& s) {
  using gptq_internal::AddModule;
  using gptq_internal::GroupIndex;
  const TinyModelSpec& m = s.model;
  nlohmann::json config = TinyHfConfig(m);
  config["quantization_config"] = {{"quant_method", "gptq"}, {"bits", s.bits},
                                   {"group_size", s.group},  {"desc_act", s.act_order},
                                   {"sym", false},           {"checkpoint_format", "gptq"}};
  dir.Write("config.json", config.dump());
  std::mt19937 rng(s.seed);
  const int64_t h = m.hidden, q = int64_t{m.heads} * m.head_dim,
                kv = int64_t{m.kv_heads} * m.head_dim, ff = m.intermediate;
  SafetensorsBuilder b;
  b.Add("model.embed_tokens.weight", "F32", {m.vocab, h});
  for (int i = 0; i < m.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    b.Add(p + "input_layernorm.weight", "F32", {h});
    b.Add(p + "post_attention_layernorm.weight", "F32", {h});
    const std::vector<int32_t> hidden_groups = GroupIndex(rng, h, s.group, s.act_order);
    AddModule(b, rng, p + "self_attn.q_proj", q, h, s, hidden_groups);
    AddModule(b, rng, p + "self_attn.k_proj", kv, h, s, hidden_groups);
    AddModule(b, rng, p + "self_attn.v_proj", kv, h, s, hidden_groups);
    AddModule(b, rng, p + "self_attn.o_proj", h, q, s, GroupIndex(rng, q, s.group, s.act_order));
    const std::vector<int32_t> mlp_groups = GroupIndex(rng, h, s.group, s.act_order);
    AddModule(b, rng, p + "mlp.gate_proj", ff, h, s, mlp_groups);
    AddModule(b, rng, p + "mlp.up_proj", ff, h, s, mlp_groups);
    AddModule(b, rng, p + "mlp.down_proj", h, ff, s, GroupIndex(rng, ff, s.group, s.act_order));
  }
  b.Add("model.norm.weight", "F32", {h});
  if (!m.tied) b.Add("lm_head.weight", "F32", {m.vocab, h});
  dir.Write("model.safetensors", b.Build());
}

}  // namespace pagellm::testing
