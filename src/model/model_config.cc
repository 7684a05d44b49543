#include "model/model_config.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

namespace pagellm {
namespace {

// Upper bounds far above any real Llama-family model; they keep products of sizes well inside
// int64 and stop a hostile config from requesting absurd buffers downstream.
constexpr int kMaxHidden = 1 << 17;
constexpr int kMaxIntermediate = 1 << 20;
constexpr int kMaxLayers = 1024;
constexpr int kMaxHeads = 1024;
constexpr int kMaxVocab = 1 << 24;
constexpr int kMaxPositions = 1 << 26;
constexpr int kMaxExperts = 1024;

Status Bad(const std::string& what) {
  return InvalidArgumentError("invalid model config: " + what);
}

Status CheckRange(const char* name, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) return Bad(fmt::format("{} = {} not in [{}, {}]", name, v, lo, hi));
  return Status::Ok();
}

}  // namespace

bool MoeConfig::IsSparseLayer(int layer) const {
  if (num_experts == 0 || (layer + 1) % decoder_sparse_step != 0) return false;
  for (int l : mlp_only_layers)
    if (l == layer) return false;
  return true;
}

Status ModelConfig::Validate() const {
  RETURN_IF_ERROR(CheckRange("hidden_size", hidden_size, 1, kMaxHidden));
  RETURN_IF_ERROR(CheckRange("intermediate_size", intermediate_size, 1, kMaxIntermediate));
  RETURN_IF_ERROR(CheckRange("num_layers", num_layers, 1, kMaxLayers));
  RETURN_IF_ERROR(CheckRange("num_heads", num_heads, 1, kMaxHeads));
  RETURN_IF_ERROR(CheckRange("num_kv_heads", num_kv_heads, 1, num_heads));
  if (num_heads % num_kv_heads != 0) {
    return Bad(
        fmt::format("num_heads {} is not a multiple of num_kv_heads {}", num_heads, num_kv_heads));
  }
  RETURN_IF_ERROR(CheckRange("head_dim", head_dim, 8, 256));
  if (head_dim % 2 != 0) return Bad(fmt::format("head_dim {} is odd", head_dim));
  RETURN_IF_ERROR(CheckRange("vocab_size", vocab_size, 1, kMaxVocab));
  RETURN_IF_ERROR(CheckRange("max_position_embeddings", max_position_embeddings, 1, kMaxPositions));
  if (!(rms_norm_eps > 0.0f) || !std::isfinite(rms_norm_eps)) {
    return Bad(fmt::format("rms_norm_eps {} must be positive and finite", rms_norm_eps));
  }
  if (!(rope_theta > 0.0f) || !std::isfinite(rope_theta)) {
    return Bad(fmt::format("rope_theta {} must be positive and finite", rope_theta));
  }
  if (rope_scaling.type != RopeScalingType::kNone) {
    if (!(rope_scaling.factor > 0.0f) || !std::isfinite(rope_scaling.factor)) {
      return Bad(fmt::format("rope_scaling factor {} must be positive", rope_scaling.factor));
    }
  }
  if (rope_scaling.type == RopeScalingType::kLlama3) {
    const RopeScaling& s = rope_scaling;
    if (!(s.low_freq_factor > 0.0f) || !(s.high_freq_factor > s.low_freq_factor) ||
        !std::isfinite(s.high_freq_factor)) {
      return Bad(
          fmt::format("llama3 rope_scaling needs 0 < low_freq_factor ({}) < "
                      "high_freq_factor ({})",
                      s.low_freq_factor, s.high_freq_factor));
    }
    RETURN_IF_ERROR(CheckRange("rope_scaling original_max_position_embeddings",
                               s.original_max_position_embeddings, 1, kMaxPositions));
  }
  RETURN_IF_ERROR(CheckRange("sliding_window", sliding_window, 0, kMaxPositions));
  if (!sliding_layers.empty() && static_cast<int>(sliding_layers.size()) != num_layers) {
    return Bad(fmt::format("{} per-layer attention types for {} layers", sliding_layers.size(),
                           num_layers));
  }
  for (const auto& [name, v] : {std::pair{"rope_local_base_freq", rope_local_theta},
                                {"embedding scale", embedding_scale},
                                {"attention scale", attention_scale},
                                {"attn_logit_softcapping", attn_logit_softcap},
                                {"final_logit_softcapping", final_logit_softcap}}) {
    if (!(v >= 0.0f) || !std::isfinite(v))
      return Bad(fmt::format("{} {} must be finite and not negative", name, v));
  }
  if (moe.num_experts != 0) {
    RETURN_IF_ERROR(CheckRange("num_experts", moe.num_experts, 1, kMaxExperts));
    RETURN_IF_ERROR(CheckRange("num_experts_per_tok", moe.num_experts_per_tok, 1, moe.num_experts));
    RETURN_IF_ERROR(
        CheckRange("moe_intermediate_size", moe.expert_intermediate, 1, kMaxIntermediate));
    RETURN_IF_ERROR(CheckRange("shared_expert_intermediate_size", moe.shared_expert_intermediate, 0,
                               kMaxIntermediate));
    RETURN_IF_ERROR(CheckRange("decoder_sparse_step", moe.decoder_sparse_step, 1, kMaxLayers));
    for (int l : moe.mlp_only_layers)
      RETURN_IF_ERROR(CheckRange("mlp_only_layers", l, 0, kMaxLayers));
  }
  RETURN_IF_ERROR(CheckRange("bos_token_id", bos_token_id, -1, vocab_size - 1));
  for (int32_t id : eos_token_ids) {
    RETURN_IF_ERROR(CheckRange("eos_token_id", id, 0, vocab_size - 1));
  }
  return Status::Ok();
}

}  // namespace pagellm
