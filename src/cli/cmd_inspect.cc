// `pagellm inspect PATH`: architecture, parameter count, dtypes, weight bytes, KV bytes/token;
// --dump-weights DIR writes every weight matrix as the kernels multiply it, dequantized.
#include <cstdio>
#include <filesystem>
#include <map>
#include <vector>

#include "cli/commands.h"
#include "fmt/format.h"
#include "kernels/weight_format.h"
#include "model/arch_spec.h"
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
// The matrix as float32 [rows][cols] in the checkpoint's input order (an input permutation,
// GPTQ act-order, undone), written raw little-endian to `path`.
Status DumpMatrix(const WeightMatrix& w, const std::string& path) {
  const WeightFormat& f = GetWeightFormat(w.dtype);
  std::vector<float> row(static_cast<size_t>(w.cols)), out(static_cast<size_t>(w.cols));
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return InvalidArgumentError(path + ": cannot open for writing");
  bool ok = true;
  for (int64_t r = 0; r < w.rows && ok; ++r) {
    f.dequantize(w.row(r), row.data(), w.cols);
    for (int64_t j = 0; j < w.cols; ++j) out[w.input_perm ? w.input_perm[j] : j] = row[j];
    ok = std::fwrite(out.data(), sizeof(float), out.size(), file) == out.size();
  }
  ok = std::fclose(file) == 0 && ok;
  if (!ok) return InvalidArgumentError(path + ": write failed");
  return Status::Ok();
}

// Writes DIR/<tensor name>.f32 for every weight matrix of the model (names as in its files:
// "model.layers.0.self_attn.q_proj.weight" for a Hugging Face checkpoint, also a quantized one).
Status DumpWeights(const LoadedModel& m, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgumentError(fmt::format("{}: {}", dir, ec.message()));
  const ArchSpec& spec = GetArchSpec(m.config.arch);
  const ArchTensorNames& n = m.format == "gguf" ? *spec.gguf_tensors : *spec.hf_tensors;
  auto dump = [&](const WeightMatrix& w, const std::string& name) {
    return DumpMatrix(w, dir + "/" + name + ".f32");
  };
  RETURN_IF_ERROR(dump(m.weights.embed, n.embed));
  for (size_t i = 0; i < m.weights.layers.size(); ++i) {
    const LayerWeights& l = m.weights.layers[i];
    const std::string p = fmt::format("{}{}.", n.layer_prefix, i);
    const std::pair<const WeightMatrix*, const char*> mats[] = {
        {&l.wq, n.wq},         {&l.wk, n.wk},     {&l.wv, n.wv},        {&l.wo, n.wo},
        {&l.w_gate, n.w_gate}, {&l.w_up, n.w_up}, {&l.w_down, n.w_down}};
    for (const auto& [w, name] : mats) RETURN_IF_ERROR(dump(*w, p + name));
  }
  if (!m.config.tie_word_embeddings) RETURN_IF_ERROR(dump(m.weights.lm_head, n.lm_head));
  return Status::Ok();
}

}  // namespace

CommandFn RegisterInspect(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto dump_dir = std::make_shared<std::string>();
  app.add_option("path", *path, "HF model directory or .gguf file")->required();
  app.add_flag("--json", *json, "Print one JSON object");
  app.add_option("--dump-weights", *dump_dir,
                 "Also write every weight matrix, dequantized as the kernels multiply it (AWQ / "
                 "GPTQ after the repack), to DIR/<tensor name>.f32: float32 [out][in], "
                 "little-endian, in the checkpoint's input order");
  return [=]() {
    auto loaded = LoadModel(*path);
    if (!loaded.ok()) return Fail(loaded.status().message());
    const LoadedModel& m = **loaded;
    if (!dump_dir->empty()) {
      const Status s = DumpWeights(m, *dump_dir);
      if (!s.ok()) return Fail(s.message());
    }
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
        {"repacked_bytes", m.repacked.bytes()},
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
    if (m.quantization.enabled) {
      const HfQuantConfig& q = m.quantization;
      j["quantization"] = {{"method", q.method_name()},
                           {"bits", q.bits},
                           {"group_size", q.group_size},
                           {"desc_act", q.desc_act},
                           {"sym", q.sym},
                           {"checkpoint_format", q.checkpoint_format},
                           {"file_bytes", m.weights.quantized_file_bytes}};
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
    if (m.quantization.enabled) {
      const HfQuantConfig& q = m.quantization;
      fmt::print(
          "quantization:       {} {}-bit, group {}{}, format {}: {} bytes in the files, "
          "repacked at load into {} bytes (the {} rows above)\n",
          q.method_name(), q.bits, q.group_size, q.desc_act ? ", act-order" : "",
          q.checkpoint_format, m.weights.quantized_file_bytes, m.repacked.bytes(),
          q.bits == 4 ? "Q5_0" : "Q8_0 / F32");
    }
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
    if (c.sliding_window > 0) {
      int local = 0;
      for (int l = 0; l < c.num_layers; ++l) local += c.LayerWindow(l) > 0 ? 1 : 0;
      fmt::print("sliding window:     {} tokens on {} of {} layers{}\n", c.sliding_window, local,
                 c.num_layers,
                 c.rope_local_theta > 0.0f
                     ? fmt::format(" (their RoPE theta {}, unscaled)", c.rope_local_theta)
                     : "");
    }
    if (c.attn_logit_softcap > 0.0f || c.final_logit_softcap > 0.0f) {
      fmt::print("soft-caps:          attention {} final logits {}\n", c.attn_logit_softcap,
                 c.final_logit_softcap);
    }
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
