#include "model/llama_family.h"

#include <fmt/format.h>

#include "model/moe_family.h"

namespace pagellm {

const ArchTensorNames kLlamaHfTensors = {
    "model.embed_tokens.weight",
    "model.layers.",
    "input_layernorm.weight",
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "self_attn.q_proj.bias",
    "self_attn.k_proj.bias",
    "self_attn.v_proj.bias",
    "post_attention_layernorm.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    "model.norm.weight",
    "lm_head.weight",
    "self_attn.q_norm.weight",
    "self_attn.k_norm.weight",
    nullptr,
    nullptr,
    nullptr,
    0.0f,
};

const ArchTensorNames kLlamaGgufTensors = {
    "token_embd.weight",
    "blk.",
    "attn_norm.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
    "attn_q.bias",
    "attn_k.bias",
    "attn_v.bias",
    "ffn_norm.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
    "output_norm.weight",
    "output.weight",
    "attn_q_norm.weight",
    "attn_k_norm.weight",
    nullptr,
    nullptr,
    nullptr,
    0.0f,
};

Status ParseLlamaHfFields(const JsonFields& f, const std::string& src, ModelConfig* c) {
  // Llama's attention_bias also adds an o_proj bias, which the graph has no slot for.
  ASSIGN_OR_RETURN(bool bias, f.BoolOr("attention_bias", false));
  if (bias) {
    return UnimplementedError(src +
                              ": 'attention_bias' true (q/k/v/o biases) is not "
                              "supported for LlamaForCausalLM");
  }
  return Status::Ok();
}

Status ParseMistralHfFields(const JsonFields& f, const std::string& src, ModelConfig* c) {
  // MistralConfig defaults to a 4096 window; newer checkpoints write null (full attention).
  if (!f.HasKey("sliding_window")) {
    c->sliding_window = 4096;
  } else {
    ASSIGN_OR_RETURN(c->sliding_window, f.IntOr("sliding_window", 0));
  }
  return Status::Ok();
}

namespace {

// Qwen2 and Qwen3 configs: transformers applies the window only to layers >= max_window_layers.
Status CheckQwenSlidingWindow(const JsonFields& f, const std::string& src, ModelConfig* c) {
  ASSIGN_OR_RETURN(bool use_sw, f.BoolOr("use_sliding_window", false));
  if (use_sw) {
    // transformers applies the window only to layers >= max_window_layers.
    ASSIGN_OR_RETURN(int max_window_layers, f.IntOr("max_window_layers", 28));
    ASSIGN_OR_RETURN(int window, f.IntOr("sliding_window", 4096));
    if (max_window_layers < c->num_layers && window > 0) {
      return UnimplementedError(fmt::format(
          "{}: use_sliding_window with max_window_layers {} < num_hidden_layers {} (per-layer "
          "sliding window) is not supported",
          src, max_window_layers, c->num_layers));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ParseQwen2HfFields(const JsonFields& f, const std::string& src, ModelConfig* c) {
  return CheckQwenSlidingWindow(f, src, c);
}

Status ParseQwen3HfFields(const JsonFields& f, const std::string& src, ModelConfig* c) {
  // Qwen3Config's head_dim defaults to 128 rather than hidden / heads.
  if (!f.HasKey("head_dim")) c->head_dim = 128;
  // Qwen3's attention_bias adds an o_proj bias too, which the graph has no slot for.
  ASSIGN_OR_RETURN(bool bias, f.BoolOr("attention_bias", false));
  if (bias) {
    return UnimplementedError(src +
                              ": 'attention_bias' true (q/k/v/o biases) is not "
                              "supported for Qwen3ForCausalLM");
  }
  return CheckQwenSlidingWindow(f, src, c);
}

Status BindLlamaFamilyWeights(const ArchTensorNames& n, TensorBinder& b, ModelConfig* config,
                              ModelWeights* w) {
  const ModelConfig& c = *config;
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  ASSIGN_OR_RETURN(w->embed, b.Matrix(n.embed, c.vocab_size, hidden));
  w->layers.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("{}{}.", n.layer_prefix, i);
    LayerWeights& l = w->layers[i];
    ASSIGN_OR_RETURN(l.attn_norm, b.Vector(p + n.attn_norm, hidden));
    ASSIGN_OR_RETURN(l.wq, b.Matrix(p + n.wq, c.q_dim(), hidden));
    ASSIGN_OR_RETURN(l.wk, b.Matrix(p + n.wk, c.kv_dim(), hidden));
    ASSIGN_OR_RETURN(l.wv, b.Matrix(p + n.wv, c.kv_dim(), hidden));
    ASSIGN_OR_RETURN(l.wo, b.Matrix(p + n.wo, hidden, c.q_dim()));
    if (c.attention_bias) {
      ASSIGN_OR_RETURN(l.bq, b.Vector(p + n.bq, c.q_dim()));
      ASSIGN_OR_RETURN(l.bk, b.Vector(p + n.bk, c.kv_dim()));
      ASSIGN_OR_RETURN(l.bv, b.Vector(p + n.bv, c.kv_dim()));
    }
    if (c.qk_norm) {
      ASSIGN_OR_RETURN(l.q_norm, b.Vector(p + n.q_norm, c.head_dim));
      ASSIGN_OR_RETURN(l.k_norm, b.Vector(p + n.k_norm, c.head_dim));
    }
    ASSIGN_OR_RETURN(l.ffn_norm, b.Vector(p + n.ffn_norm, hidden));
    if (c.moe.IsSparseLayer(i)) {
      RETURN_IF_ERROR(BindMoeLayer(*n.moe, p, b, c, &l.moe));
      continue;
    }
    ASSIGN_OR_RETURN(l.w_gate, b.Matrix(p + n.w_gate, inter, hidden));
    ASSIGN_OR_RETURN(l.w_up, b.Matrix(p + n.w_up, inter, hidden));
    ASSIGN_OR_RETURN(l.w_down, b.Matrix(p + n.w_down, hidden, inter));
  }
  ASSIGN_OR_RETURN(w->final_norm, b.Vector(n.final_norm, hidden));
  return BindOutputHead(n, b, config, w);
}

Status BindOutputHead(const ArchTensorNames& n, TensorBinder& b, ModelConfig* config,
                      ModelWeights* w) {
  if (!b.Has(n.lm_head)) config->tie_word_embeddings = true;
  if (config->tie_word_embeddings) {
    w->lm_head = w->embed;
    b.Ignore(n.lm_head);
  } else {
    ASSIGN_OR_RETURN(w->lm_head, b.Matrix(n.lm_head, config->vocab_size, config->hidden_size));
  }
  config->weight_dtype = w->layers[0].wq.dtype;
  return Status::Ok();
}

int64_t CountLlamaFamilyParameters(const ModelConfig& c, const ShardDims& d) {
  const int64_t hidden = c.hidden_size;
  const int64_t lm_heads = c.tie_word_embeddings ? 1 : 2;
  const int64_t bias = c.attention_bias ? 1 : 0;
  const int64_t qk_norm = c.qk_norm ? 2 * int64_t{c.head_dim} : 0;
  // q and o; k and v; the two norms; the q/k/v biases; the q/k norms.
  const int64_t attn = 2 * d.q_dim * hidden + 2 * d.kv_dim * hidden + 2 * hidden +
                       bias * (d.q_dim + 2 * d.kv_dim) + qk_norm;
  const int64_t expert_inter =
      d.expert_intermediate >= 0 ? d.expert_intermediate : c.moe.expert_intermediate;
  const int64_t shared_inter = d.shared_expert_intermediate >= 0 ? d.shared_expert_intermediate
                                                                 : c.moe.shared_expert_intermediate;
  int64_t layers = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    // gate, up and down, or the experts
    layers += attn + (c.moe.IsSparseLayer(l) ? MoeLayerParameters(c, hidden, expert_inter,
                                                                  shared_inter, /*active=*/false)
                                             : 3 * d.intermediate * hidden);
  }
  return lm_heads * d.vocab * hidden + layers + hidden;
}

}  // namespace pagellm
