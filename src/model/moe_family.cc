#include "model/moe_family.h"

#include <fmt/format.h>

#include "model/llama_family.h"

namespace pagellm {
namespace {

const MoeTensorNames kMixtralHfMoe = {
    .router = "block_sparse_moe.gate.weight",
    .stacked = false,
    .expert_prefix = "block_sparse_moe.experts.",
    .gate = "w1.weight",
    .up = "w3.weight",
    .down = "w2.weight",
    .shared_gate = nullptr,
    .shared_up = nullptr,
    .shared_down = nullptr,
    .shared_expert_gate = nullptr,
};

const MoeTensorNames kQwenHfMoe = {
    .router = "mlp.gate.weight",
    .stacked = false,
    .expert_prefix = "mlp.experts.",
    .gate = "gate_proj.weight",
    .up = "up_proj.weight",
    .down = "down_proj.weight",
    .shared_gate = "mlp.shared_expert.gate_proj.weight",
    .shared_up = "mlp.shared_expert.up_proj.weight",
    .shared_down = "mlp.shared_expert.down_proj.weight",
    .shared_expert_gate = "mlp.shared_expert_gate.weight",
};

const MoeTensorNames kGgufMoe = {
    .router = "ffn_gate_inp.weight",
    .stacked = true,
    .expert_prefix = nullptr,
    .gate = "ffn_gate_exps.weight",
    .up = "ffn_up_exps.weight",
    .down = "ffn_down_exps.weight",
    .shared_gate = "ffn_gate_shexp.weight",
    .shared_up = "ffn_up_shexp.weight",
    .shared_down = "ffn_down_shexp.weight",
    .shared_expert_gate = "ffn_gate_inp_shexp.weight",
};

// The Llama family's names with the experts of `moe` (dense layers keep mlp.*_proj).
constexpr ArchTensorNames WithMoe(const ArchTensorNames& base, const MoeTensorNames* moe) {
  ArchTensorNames n = base;
  n.moe = moe;
  return n;
}

// Qwen2-MoE / Qwen3-MoE: the experts' shape, the sparse-layer pattern, the routing rule.
Status ParseQwenMoeFields(const JsonFields& f, ModelConfig* c, int default_experts,
                          int default_top_k, int default_inter) {
  MoeConfig& m = c->moe;
  ASSIGN_OR_RETURN(m.num_experts, f.IntOr("num_experts", default_experts));
  ASSIGN_OR_RETURN(m.num_experts_per_tok, f.IntOr("num_experts_per_tok", default_top_k));
  ASSIGN_OR_RETURN(m.expert_intermediate, f.IntOr("moe_intermediate_size", default_inter));
  ASSIGN_OR_RETURN(m.norm_topk_prob, f.BoolOr("norm_topk_prob", false));
  ASSIGN_OR_RETURN(m.decoder_sparse_step, f.IntOr("decoder_sparse_step", 1));
  ASSIGN_OR_RETURN(std::optional<std::vector<int32_t>> only, f.IdList("mlp_only_layers"));
  if (only) m.mlp_only_layers.assign(only->begin(), only->end());
  return Status::Ok();
}

}  // namespace

const ArchTensorNames kMixtralHfTensors = WithMoe(kLlamaHfTensors, &kMixtralHfMoe);
const ArchTensorNames kQwenMoeHfTensors = WithMoe(kLlamaHfTensors, &kQwenHfMoe);
const ArchTensorNames kMoeGgufTensors = WithMoe(kLlamaGgufTensors, &kGgufMoe);

Status ParseMixtralHfFields(const JsonFields& f, const std::string& src, ModelConfig* c) {
  // MixtralConfig: sliding_window defaults to None (full attention).
  ASSIGN_OR_RETURN(c->sliding_window, f.IntOr("sliding_window", 0));
  MoeConfig& m = c->moe;
  ASSIGN_OR_RETURN(m.num_experts, f.IntOr("num_local_experts", 8));
  ASSIGN_OR_RETURN(m.num_experts_per_tok, f.IntOr("num_experts_per_tok", 2));
  m.expert_intermediate = c->intermediate_size;
  m.norm_topk_prob = true;  // softmax over the selected logits
  return Status::Ok();
}

Status ParseQwen2MoeHfFields(const JsonFields& f, const std::string& src, ModelConfig* c) {
  RETURN_IF_ERROR(ParseQwen2HfFields(f, src, c));
  RETURN_IF_ERROR(ParseQwenMoeFields(f, c, 60, 4, 1408));
  ASSIGN_OR_RETURN(c->moe.shared_expert_intermediate,
                   f.IntOr("shared_expert_intermediate_size", 5632));
  return Status::Ok();
}

Status ParseQwen3MoeHfFields(const JsonFields& f, const std::string& src, ModelConfig* c) {
  RETURN_IF_ERROR(ParseQwen3HfFields(f, src, c));
  return ParseQwenMoeFields(f, c, 128, 8, 768);
}

Status BindMoeLayer(const MoeTensorNames& n, const std::string& p, TensorBinder& b,
                    const ModelConfig& c, MoeWeights* w) {
  const MoeConfig& m = c.moe;
  const int64_t hidden = c.hidden_size, inter = m.expert_intermediate;
  ASSIGN_OR_RETURN(w->router, b.Matrix(p + n.router, m.num_experts, hidden));
  if (n.stacked) {
    ASSIGN_OR_RETURN(w->gate, b.StackedMatrices(p + n.gate, m.num_experts, inter, hidden));
    ASSIGN_OR_RETURN(w->up, b.StackedMatrices(p + n.up, m.num_experts, inter, hidden));
    ASSIGN_OR_RETURN(w->down, b.StackedMatrices(p + n.down, m.num_experts, hidden, inter));
  } else {
    w->gate.resize(m.num_experts);
    w->up.resize(m.num_experts);
    w->down.resize(m.num_experts);
    for (int e = 0; e < m.num_experts; ++e) {
      const std::string ep = fmt::format("{}{}{}.", p, n.expert_prefix, e);
      ASSIGN_OR_RETURN(w->gate[e], b.Matrix(ep + n.gate, inter, hidden));
      ASSIGN_OR_RETURN(w->up[e], b.Matrix(ep + n.up, inter, hidden));
      ASSIGN_OR_RETURN(w->down[e], b.Matrix(ep + n.down, hidden, inter));
    }
  }
  if (m.shared_expert_intermediate > 0) {
    const int64_t s = m.shared_expert_intermediate;
    ASSIGN_OR_RETURN(w->shared_gate, b.Matrix(p + n.shared_gate, s, hidden));
    ASSIGN_OR_RETURN(w->shared_up, b.Matrix(p + n.shared_up, s, hidden));
    ASSIGN_OR_RETURN(w->shared_down, b.Matrix(p + n.shared_down, hidden, s));
    ASSIGN_OR_RETURN(w->shared_expert_gate, b.RowVector(p + n.shared_expert_gate, hidden));
  }
  return Status::Ok();
}

int64_t MoeLayerParameters(const ModelConfig& c, int64_t hidden, int64_t expert_inter,
                           int64_t shared_inter, bool active) {
  const MoeConfig& m = c.moe;
  const int64_t experts = active ? m.num_experts_per_tok : m.num_experts;
  int64_t n = int64_t{m.num_experts} * hidden + experts * 3 * expert_inter * hidden;
  if (m.shared_expert_intermediate > 0) n += 3 * shared_inter * hidden + hidden;
  return n;
}

int64_t CountActiveParameters(const ModelConfig& c) {
  const ShardDims full{c.q_dim(), c.kv_dim(), c.intermediate_size, c.vocab_size};
  int64_t n = GetArchSpec(c.arch).count_parameters(c, full);
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.moe.IsSparseLayer(l)) continue;
    const int64_t e = c.moe.expert_intermediate, s = c.moe.shared_expert_intermediate;
    n -= MoeLayerParameters(c, c.hidden_size, e, s, /*active=*/false) -
         MoeLayerParameters(c, c.hidden_size, e, s, /*active=*/true);
  }
  return n;
}

int64_t ActiveWeightBytes(const ModelConfig& c, const ModelWeights& w) {
  int64_t bytes = w.total_bytes;
  const int64_t unused = c.moe.num_experts - c.moe.num_experts_per_tok;
  for (const LayerWeights& l : w.layers) {
    if (l.moe.gate.empty()) continue;
    bytes -= unused * (l.moe.gate[0].nbytes() + l.moe.up[0].nbytes() + l.moe.down[0].nbytes());
  }
  return bytes;
}

}  // namespace pagellm
