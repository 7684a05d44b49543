// Hyper-parameters of a Llama-family decoder, normalised from HF config.json or GGUF metadata.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/rope.h"
#include "pagellm/dtype.h"
#include "pagellm/status.h"

namespace pagellm {

// Llama 1/2/3 and SmolLM are kLlama; Mistral differs only by sliding window; Qwen2/2.5 adds
// q/k/v biases; Qwen3 drops them for a per-head RMSNorm of q and k. Mixtral, Qwen2-MoE and
// Qwen3-MoE are those decoders with a mixture-of-experts FFN. Gemma 2 and Gemma 3 add GeGLU,
// post-norms, soft-capping and interleaved local (sliding-window) and global layers
// (model/gemma_family.h). Each has one ArchSpec row (model/arch_spec.h) that says everything
// else.
enum class Architecture {
  kLlama,
  kMistral,
  kQwen2,
  kQwen3,
  kMixtral,
  kQwen2Moe,
  kQwen3Moe,
  kGemma2,
  kGemma3
};

// The gated FFN's activation: out = act(h·Wgate) ⊙ (h·Wup).
enum class FfnActivation {
  kSilu,      // SwiGLU (Llama, Qwen, Mistral)
  kGeluTanh,  // GeGLU with the tanh GELU (Gemma: gelu_pytorch_tanh)
};

// A mixture-of-experts FFN: per token, p = softmax(h · routerᵀ) over all experts, the
// num_experts_per_tok largest p (ties to the lower expert id) select SwiGLU experts of width
// expert_intermediate, and out = sum_k p_k · expert_k(h) (p_k renormalised to sum 1 over the
// selected when norm_topk_prob; Mixtral's softmax over the selected logits is that rule).
// Qwen2-MoE adds a shared SwiGLU expert of width shared_expert_intermediate, scaled by
// sigmoid(h · shared_expert_gate). num_experts 0: every layer is dense.
struct MoeConfig {
  int num_experts = 0;
  int num_experts_per_tok = 0;
  int expert_intermediate = 0;
  bool norm_topk_prob = true;
  int shared_expert_intermediate = 0;  // 0: no shared expert
  // Layer l is sparse when (l + 1) % decoder_sparse_step == 0 and l is not in mlp_only_layers
  // (transformers' Qwen2-MoE / Qwen3-MoE rule); the others are dense of intermediate_size.
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;

  bool IsSparseLayer(int layer) const;
};

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string hf_architecture;  // e.g. "LlamaForCausalLM", "Qwen2ForCausalLM"
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // config's head_dim, else hidden_size / num_heads
  int vocab_size = 0;
  int max_position_embeddings = 0;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  // Per-pair divisors of the RoPE inverse frequencies ([head_dim / 2]), from GGUF
  // `rope_freqs.weight`; when set they replace the rule of rope_scaling.
  std::vector<float> rope_freq_divisors;
  // true: RoPE rotates adjacent pairs (x[2i], x[2i+1]) — GGUF "llama" q/k layout and llama2.c.
  // false: rotate_half pairs (x[i], x[i + d/2]) — Hugging Face layout and GGUF "qwen2".
  bool rope_interleaved = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2)
  // q and k are RMS-normalised per head ([head_dim] weights, eps rms_norm_eps) before RoPE
  // (Qwen3).
  bool qk_norm = false;
  bool tie_word_embeddings = false;
  int sliding_window = 0;  // 0 = full attention
  // Which layers the window applies to ([num_layers], 1 = local sliding-window layer); empty:
  // every layer (Mistral). Gemma 2 alternates local and global, Gemma 3 has 5 local per global.
  std::vector<uint8_t> sliding_layers;
  // RoPE base of the local layers, unscaled (Gemma 3's rope_local_base_freq); 0: the local
  // layers use rope_theta and rope_scaling like the global ones.
  float rope_local_theta = 0.0f;
  FfnActivation activation = FfnActivation::kSilu;
  // Gemma: x = embedding · embedding_scale (sqrt(hidden)); 0 = no scaling.
  float embedding_scale = 0.0f;
  // Attention scores are q·k · attention_scale; 0 = 1/sqrt(head_dim) (Gemma:
  // query_pre_attn_scalar^-1/2).
  float attention_scale = 0.0f;
  // Soft-capping s -> cap · tanh(s / cap) of the attention scores (after scaling) and of the
  // final logits (Gemma 2); 0 = none.
  float attn_logit_softcap = 0.0f;
  float final_logit_softcap = 0.0f;
  MoeConfig moe;
  DType weight_dtype = DType::kF32;  // dtype of the bulk of the matrices (for reports)
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;

  // Checks internal consistency (positive sizes, heads divide, head_dim in [8, 256] even...).
  Status Validate() const;
  int64_t q_dim() const { return int64_t{num_heads} * head_dim; }
  int64_t kv_dim() const { return int64_t{num_kv_heads} * head_dim; }
  // The sliding window of `layer` (0 = full attention).
  int LayerWindow(int layer) const {
    return sliding_layers.empty() || sliding_layers[layer] != 0 ? sliding_window : 0;
  }
  // Whether `layer` uses the local RoPE table (rope_local_params).
  bool LayerUsesLocalRope(int layer) const {
    return rope_local_theta > 0.0f && LayerWindow(layer) > 0;
  }
  float AttentionScale() const {
    return attention_scale > 0.0f ? attention_scale
                                  : 1.0f / std::sqrt(static_cast<float>(head_dim));
  }
  // The RoPE table's inputs (kernels/rope.h) from the rope_* fields.
  RopeParams rope_params() const {
    return RopeParams{head_dim, rope_theta, rope_scaling, rope_freq_divisors, rope_interleaved};
  }
  // The local layers' RoPE (rope_local_theta, no scaling); only when rope_local_theta > 0.
  RopeParams rope_local_params() const {
    return RopeParams{head_dim, rope_local_theta, RopeScaling{}, {}, rope_interleaved};
  }
};

}  // namespace pagellm
