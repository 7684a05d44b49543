// `pagellm inspect PATH`: architecture, parameter count, dtypes, weight bytes, KV bytes/token.
#include <map>

#include "cli/commands.h"
#include "fmt/format.h"
#include "model/model_weights.h"
#include "model/moe_family.h"
#include "nlohmann/json.hpp"

namespace pagellm::cli {

int Fail(const std::string& message) {
  fmt::print(stderr, "error: {}\n", message);
  return 1;
}

namespace {
const char* RopeScalingName(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kNone:
      return "none";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kLlama3:
      return "llama3";
  }
  return "?";
}
}  // namespace

CommandFn RegisterInspect(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  app.add_option("path", *path, "HF model directory or .gguf file")->required();
  app.add_flag("--json", *json, "Print one JSON object");
  return [=]() {
    auto loaded = LoadModel(*path);
    if (!loaded.ok()) return Fail(loaded.status().message());
    const LoadedModel& m = **loaded;
    const ModelConfig& c = m.config;
    std::map<std::string, int64_t> dtype_bytes;
    auto count = [&](const WeightMatrix& w) {
      if (w.rows == 0) return;  // a sparse layer's dense FFN, a dense layer's experts
      dtype_bytes[std::string(DTypeName(w.dtype))] += w.nbytes();
    };
    count(m.weights.embed);
    for (const auto& l : m.weights.layers) {
      for (const WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
        count(*w);
      const MoeWeights& e = l.moe;  // empty in dense layers
      for (const WeightMatrix* w : {&e.router, &e.shared_gate, &e.shared_up, &e.shared_down})
        count(*w);
      for (const auto* experts : {&e.gate, &e.up, &e.down})
        for (const WeightMatrix& w : *experts) count(w);
    }
    if (!c.tie_word_embeddings) count(m.weights.lm_head);
    // K and V, every layer, float32 cache (the CPU backend's cache dtype).
    const int64_t kv_bytes_per_token = 2LL * c.num_layers * c.kv_dim() * 4;
    nlohmann::json j = {
        {"path", m.path},
        {"format", m.format},
        {"architecture", c.hf_architecture},
        {"num_parameters", m.weights.num_parameters},
        {"weights_bytes", m.weights.total_bytes},
        {"dtype_bytes", dtype_bytes},
        {"hidden_size", c.hidden_size},
        {"intermediate_size", c.intermediate_size},
        {"num_layers", c.num_layers},
        {"num_heads", c.num_heads},
        {"num_kv_heads", c.num_kv_heads},
        {"head_dim", c.head_dim},
        {"vocab_size", c.vocab_size},
        {"max_position_embeddings", c.max_position_embeddings},
        {"rope_theta", c.rope_theta},
        {"rope_scaling", RopeScalingName(c.rope_scaling.type)},
        {"rope_interleaved", c.rope_interleaved},
        {"attention_bias", c.attention_bias},
        {"tie_word_embeddings", c.tie_word_embeddings},
        {"kv_cache_dtype", "float32"},
        {"kv_bytes_per_token", kv_bytes_per_token},
    };
    const MoeConfig& moe = c.moe;
    j["qk_norm"] = c.qk_norm;
    if (moe.num_experts > 0) {
      j["moe"] = {{"num_experts", moe.num_experts},
                  {"num_experts_per_tok", moe.num_experts_per_tok},
                  {"expert_intermediate_size", moe.expert_intermediate},
                  {"shared_expert_intermediate_size", moe.shared_expert_intermediate},
                  {"norm_topk_prob", moe.norm_topk_prob},
                  {"active_parameters", CountActiveParameters(c)},
                  {"active_weights_bytes_per_token", ActiveWeightBytes(c, m.weights)}};
    }
    if (*json) {
      fmt::print("{}\n", j.dump(2));
      return 0;
    }
    fmt::print("model:              {} ({})\n", m.path, m.format);
    fmt::print("architecture:       {}\n", c.hf_architecture);
    fmt::print("parameters:         {} ({:.1f} M)\n", m.weights.num_parameters,
               m.weights.num_parameters / 1e6);
    fmt::print("weights:            {} bytes ({:.1f} MiB)\n", m.weights.total_bytes,
               m.weights.total_bytes / 1048576.0);
    for (const auto& [name, bytes] : dtype_bytes)
      fmt::print("  {:<6}            {} bytes\n", name, bytes);
    fmt::print("layers:             {}\n", c.num_layers);
    fmt::print("hidden / ffn:       {} / {}\n", c.hidden_size, c.intermediate_size);
    fmt::print("heads / kv heads:   {} / {} (head_dim {})\n", c.num_heads, c.num_kv_heads,
               c.head_dim);
    fmt::print("vocab:              {}\n", c.vocab_size);
    fmt::print("context:            {}\n", c.max_position_embeddings);
    fmt::print("rope:               theta {} scaling {} {}\n", c.rope_theta,
               RopeScalingName(c.rope_scaling.type),
               c.rope_interleaved ? "(interleaved pairs)" : "(rotate_half)");
    fmt::print("qkv bias:           {}\n", c.attention_bias ? "yes" : "no");
    fmt::print("q/k norm:           {}\n", c.qk_norm ? "yes" : "no");
    if (moe.num_experts > 0) {
      fmt::print("experts:            {} of {} per token (width {}{}, {})\n",
                 moe.num_experts_per_tok, moe.num_experts, moe.expert_intermediate,
                 moe.shared_expert_intermediate > 0
                     ? fmt::format(", shared expert {}", moe.shared_expert_intermediate)
                     : "",
                 moe.norm_topk_prob ? "weights renormalised" : "softmax weights");
      fmt::print("active per token:   {} parameters ({:.1f} M), {} weight bytes ({:.1f} MiB)\n",
                 CountActiveParameters(c), CountActiveParameters(c) / 1e6,
                 ActiveWeightBytes(c, m.weights), ActiveWeightBytes(c, m.weights) / 1048576.0);
    }
    fmt::print("tied embeddings:    {}\n", c.tie_word_embeddings ? "yes" : "no");
    fmt::print("KV cache per token: {} bytes (float32 K+V, {} layers x {} kv dims)\n",
               kv_bytes_per_token, c.num_layers, c.kv_dim());
    return 0;
  };
}

}  // namespace pagellm::cli
