#include "model/gemma_family.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "model/llama_family.h"

namespace pagellm {

const ArchTensorNames kGemmaHfTensors = {
    "model.embed_tokens.weight",
    "model.layers.",
    "input_layernorm.weight",
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    nullptr,
    nullptr,
    nullptr,
    "pre_feedforward_layernorm.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    "model.norm.weight",
    "lm_head.weight",
    "self_attn.q_norm.weight",
    "self_attn.k_norm.weight",
    nullptr,
    // HF Gemma's post_attention_layernorm is the norm of the attention output (in Llama it
    // is the FFN's input norm).
    "post_attention_layernorm.weight",
    "post_feedforward_layernorm.weight",
    1.0f,
};

const ArchTensorNames kGemmaGgufTensors = {
    "token_embd.weight",
    "blk.",
    "attn_norm.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
    nullptr,
    nullptr,
    nullptr,
    "ffn_norm.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
    "output_norm.weight",
    "output.weight",
    "attn_q_norm.weight",
    "attn_k_norm.weight",
    nullptr,
    "post_attention_norm.weight",
    "post_ffw_norm.weight",
    0.0f,
};

namespace {

// The per-layer tables are sized by num_layers before ModelConfig::Validate runs: a hostile
// count must fail here, not allocate.
constexpr int kMaxLayers = 1024;

Status CheckLayerCount(const ModelConfig& c, const std::string& src) {
  if (c.num_layers < 1 || c.num_layers > kMaxLayers) {
    return InvalidArgumentError(
        fmt::format("{}: {} layers not in [1, {}]", src, c.num_layers, kMaxLayers));
  }
  return Status::Ok();
}

// Fields both Gemma configs share; their defaults are the transformers config classes'.
Status ParseGemmaCommon(const JsonFields& f, const std::string& src, ModelConfig* c,
                        float default_attn_softcap, float default_final_softcap) {
  if (!f.HasKey("head_dim")) c->head_dim = 256;
  if (!f.HasKey("tie_word_embeddings")) c->tie_word_embeddings = true;
  ASSIGN_OR_RETURN(float qpas, f.FloatOr("query_pre_attn_scalar", 256.0f));
  if (!(qpas > 0.0f) || !std::isfinite(qpas)) return f.WrongType("query_pre_attn_scalar", "> 0");
  c->attention_scale = 1.0f / std::sqrt(qpas);
  // The embedding is scaled by sqrt(hidden) rounded to the activations' dtype (float32 here).
  c->embedding_scale = std::sqrt(static_cast<float>(c->hidden_size));
  ASSIGN_OR_RETURN(c->sliding_window, f.IntOr("sliding_window", 4096));
  // Soft-capping: absent takes the class default, null turns it off.
  auto softcap = [&](const char* key, float dflt, float* out) -> Status {
    if (!f.HasKey(key)) {
      *out = dflt;
      return Status::Ok();
    }
    ASSIGN_OR_RETURN(*out, f.FloatOr(key, 0.0f));
    return Status::Ok();
  };
  RETURN_IF_ERROR(softcap("attn_logit_softcapping", default_attn_softcap, &c->attn_logit_softcap));
  RETURN_IF_ERROR(
      softcap("final_logit_softcapping", default_final_softcap, &c->final_logit_softcap));
  ASSIGN_OR_RETURN(bool bias, f.BoolOr("attention_bias", false));
  if (bias) {
    return UnimplementedError(src +
                              ": 'attention_bias' true (q/k/v/o biases) is not supported for " +
                              c->hf_architecture);
  }
  return Status::Ok();
}

// Per-layer attention types from `layer_types` (newer transformers), else layer l is local
// when `is_local(l)` (the older sliding_window_pattern rules).
template <typename IsLocal>
Status ParseLayerTypes(const JsonFields& f, const std::string& src, ModelConfig* c,
                       IsLocal is_local) {
  RETURN_IF_ERROR(CheckLayerCount(*c, src));
  c->sliding_layers.assign(c->num_layers, 0);
  const nlohmann::json* types = f.Get("layer_types");
  if (types == nullptr) {
    for (int l = 0; l < c->num_layers; ++l) c->sliding_layers[l] = is_local(l) ? 1 : 0;
    return Status::Ok();
  }
  if (!types->is_array() || static_cast<int>(types->size()) != c->num_layers) {
    return f.WrongType("layer_types", "a list of num_hidden_layers attention types");
  }
  for (int l = 0; l < c->num_layers; ++l) {
    const nlohmann::json& t = (*types)[l];
    if (t == "sliding_attention") {
      c->sliding_layers[l] = 1;
    } else if (t != "full_attention") {
      return f.WrongType("layer_types", "'sliding_attention' or 'full_attention' entries");
    }
  }
  return Status::Ok();
}

// An optional GGUF float key; absent leaves `*out` as it is.
Status OptionalFloat(const GgufFile& g, const std::string& key, float* out) {
  if (g.Find(key) == nullptr) return Status::Ok();
  ASSIGN_OR_RETURN(double v, g.GetFloat(key));
  *out = static_cast<float>(v);
  return Status::Ok();
}

// What GGUF files leave implicit, as llama.cpp's loader derives it: query_pre_attn_scalar is
// hidden / heads for the 27B shapes (`full_layers` layers) and head_dim otherwise; local
// layers are those with (l + 1) % pattern != 0; soft-caps come from their keys.
Status ParseGemmaGguf(const GgufFile& g, const std::string& p, ModelConfig* c, int pattern,
                      int full_layers, float default_attn_softcap, float default_final_softcap) {
  RETURN_IF_ERROR(CheckLayerCount(*c, g.name()));
  const float qpas = c->num_layers == full_layers
                         ? static_cast<float>(c->hidden_size / c->num_heads)
                         : static_cast<float>(c->head_dim);
  c->attention_scale = 1.0f / std::sqrt(qpas);
  c->embedding_scale = std::sqrt(static_cast<float>(c->hidden_size));
  c->sliding_layers.assign(c->num_layers, 0);
  for (int l = 0; l < c->num_layers; ++l) c->sliding_layers[l] = (l + 1) % pattern != 0;
  c->attn_logit_softcap = default_attn_softcap;
  c->final_logit_softcap = default_final_softcap;
  RETURN_IF_ERROR(OptionalFloat(g, p + "attn_logit_softcapping", &c->attn_logit_softcap));
  RETURN_IF_ERROR(OptionalFloat(g, p + "final_logit_softcapping", &c->final_logit_softcap));
  return Status::Ok();
}

StatusOr<std::vector<float>> NormVector(TensorBinder& b, const std::string& name, int64_t n,
                                        float offset) {
  ASSIGN_OR_RETURN(std::vector<float> w, b.Vector(name, n));
  if (offset != 0.0f)
    for (float& v : w) v += offset;
  return w;
}

}  // namespace

Status ParseGemma2HfFields(const JsonFields& f, const std::string& src, ModelConfig* c) {
  RETURN_IF_ERROR(ParseGemmaCommon(f, src, c, 50.0f, 30.0f));
  // Gemma 2 alternates: even layers local, odd layers global.
  return ParseLayerTypes(f, src, c, [](int l) { return l % 2 == 0; });
}

Status ParseGemma3HfFields(const JsonFields& f, const std::string& src, ModelConfig* c) {
  if (!f.HasKey("rope_theta")) c->rope_theta = 1e6f;
  RETURN_IF_ERROR(ParseGemmaCommon(f, src, c, 0.0f, 0.0f));
  ASSIGN_OR_RETURN(c->rope_local_theta, f.FloatOr("rope_local_base_freq", 10000.0f));
  if (!(c->rope_local_theta > 0.0f)) return f.WrongType("rope_local_base_freq", "> 0");
  ASSIGN_OR_RETURN(int pattern, f.IntOr("sliding_window_pattern", 6));
  if (pattern < 1) return f.WrongType("sliding_window_pattern", "a positive integer");
  return ParseLayerTypes(f, src, c, [pattern](int l) { return (l + 1) % pattern != 0; });
}

Status ParseGemma2GgufFields(const GgufFile& g, const std::string& p, ModelConfig* c) {
  if (c->sliding_window == 0) c->sliding_window = 4096;  // llama.cpp's Gemma 2 default
  return ParseGemmaGguf(g, p, c, /*pattern=*/2, /*full_layers=*/46, 50.0f, 30.0f);
}

Status ParseGemma3GgufFields(const GgufFile& g, const std::string& p, ModelConfig* c) {
  if (c->sliding_window == 0) {
    return NotFoundError(g.name() + ": missing metadata key '" + p + "attention.sliding_window'");
  }
  c->rope_local_theta = 10000.0f;
  return ParseGemmaGguf(g, p, c, /*pattern=*/6, /*full_layers=*/62, 0.0f, 0.0f);
}

Status BindGemmaWeights(const ArchTensorNames& n, TensorBinder& b, ModelConfig* config,
                        ModelWeights* w) {
  const ModelConfig& c = *config;
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  const float off = n.norm_weight_offset;
  ASSIGN_OR_RETURN(w->embed, b.Matrix(n.embed, c.vocab_size, hidden));
  w->layers.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("{}{}.", n.layer_prefix, i);
    LayerWeights& l = w->layers[i];
    ASSIGN_OR_RETURN(l.attn_norm, NormVector(b, p + n.attn_norm, hidden, off));
    ASSIGN_OR_RETURN(l.wq, b.Matrix(p + n.wq, c.q_dim(), hidden));
    ASSIGN_OR_RETURN(l.wk, b.Matrix(p + n.wk, c.kv_dim(), hidden));
    ASSIGN_OR_RETURN(l.wv, b.Matrix(p + n.wv, c.kv_dim(), hidden));
    ASSIGN_OR_RETURN(l.wo, b.Matrix(p + n.wo, hidden, c.q_dim()));
    if (c.qk_norm) {
      ASSIGN_OR_RETURN(l.q_norm, NormVector(b, p + n.q_norm, c.head_dim, off));
      ASSIGN_OR_RETURN(l.k_norm, NormVector(b, p + n.k_norm, c.head_dim, off));
    }
    ASSIGN_OR_RETURN(l.post_attn_norm, NormVector(b, p + n.post_attn_norm, hidden, off));
    ASSIGN_OR_RETURN(l.ffn_norm, NormVector(b, p + n.ffn_norm, hidden, off));
    ASSIGN_OR_RETURN(l.w_gate, b.Matrix(p + n.w_gate, inter, hidden));
    ASSIGN_OR_RETURN(l.w_up, b.Matrix(p + n.w_up, inter, hidden));
    ASSIGN_OR_RETURN(l.w_down, b.Matrix(p + n.w_down, hidden, inter));
    ASSIGN_OR_RETURN(l.post_ffn_norm, NormVector(b, p + n.post_ffn_norm, hidden, off));
  }
  ASSIGN_OR_RETURN(w->final_norm, NormVector(b, n.final_norm, hidden, off));
  return BindOutputHead(n, b, config, w);
}

int64_t CountGemmaParameters(const ModelConfig& c, const ShardDims& d) {
  const int64_t hidden = c.hidden_size;
  const int64_t lm_heads = c.tie_word_embeddings ? 1 : 2;
  const int64_t qk_norm = c.qk_norm ? 2 * int64_t{c.head_dim} : 0;
  // q and o; k and v; four norms; the q/k norms; gate, up and down.
  const int64_t layer = 2 * d.q_dim * hidden + 2 * d.kv_dim * hidden + 4 * hidden + qk_norm +
                        3 * d.intermediate * hidden;
  return lm_heads * d.vocab * hidden + c.num_layers * layer + hidden;
}

}  // namespace pagellm
