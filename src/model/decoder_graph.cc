#include "model/decoder_graph.h"

#include <algorithm>

#include "kernels/ops.h"

namespace pagellm {
namespace {

// Scratch slots of ForwardDecoder.
enum Slot : int {
  kX,        // [T][hidden] residual stream
  kH,        // [T][hidden] normed input
  kQ,        // [T][q_dim]
  kK,        // [T][kv_dim]
  kV,        // [T][kv_dim]
  kAttn,     // [T][q_dim]
  kGate,     // [T][intermediate]
  kUp,       // [T][intermediate]
  kProj,     // [T][hidden]
  kLogitIn,  // [rows][hidden]
};

}  // namespace

int64_t DecoderActivationFloats(const ModelConfig& c, int64_t t, int64_t rows) {
  const MoeConfig& m = c.moe;
  const int64_t hidden = c.hidden_size, k = m.num_experts_per_tok;
  // MoeFfn's buffers: router logits and the routing [T][E + 2k], the selected experts'
  // outputs [T][k][hidden], an expert's input or output [T][max(hidden, inter)], its gate and
  // up [T][2 max(inter, shared inter)].
  const int64_t widest = std::max(m.expert_intermediate, m.shared_expert_intermediate);
  const int64_t moe = m.num_experts == 0
                          ? 0
                          : t * (m.num_experts + 2 * k + k * hidden +
                                 std::max<int64_t>(hidden, m.expert_intermediate) + 2 * widest);
  return t * (3 * hidden + 2 * c.q_dim() + 2 * c.kv_dim() + 2 * int64_t{c.intermediate_size}) +
         rows * (hidden + c.vocab_size) + moe;
}

void EmitDecoderOutputs(const LoadedModel& model, const ForwardBatch& batch, ForwardOps& ops,
                        const float* x, int logit_in_slot, ForwardOutput* out) {
  const ModelConfig& c = model.config;
  const ModelWeights& mw = model.weights;
  const int64_t hidden = c.hidden_size;
  // Gather the rows that need logits, normalise them and project to the vocabulary.
  out->row_offset.clear();
  int64_t rows = 0;
  for (const SequenceChunk& s : batch.seqs) {
    out->row_offset.push_back(static_cast<int32_t>(rows));
    rows += s.all_logits ? s.num_tokens : 1;
  }
  float* logit_in = ops.Scratch(logit_in_slot, rows * hidden);
  int64_t r = 0, t = 0;
  for (const SequenceChunk& s : batch.seqs) {
    const int64_t first = s.all_logits ? t : t + s.num_tokens - 1;
    const int64_t n = s.all_logits ? s.num_tokens : 1;
    ops.RmsNorm(x + first * hidden, mw.final_norm.data(), c.rms_norm_eps, logit_in + r * hidden, n,
                hidden);
    r += n;
    t += s.num_tokens;
  }
  ops.Logits(mw.lm_head, logit_in, rows, out);
  if (c.final_logit_softcap > 0.0f) {
    SoftCap(out->logits.data(), static_cast<int64_t>(out->logits.size()), c.final_logit_softcap);
  }

  // Hidden states for the sequences that asked (embeddings), checked once per sequence.
  out->hidden.clear();
  out->hidden_offset.clear();
  t = 0;
  int64_t hidden_rows = 0;
  for (const SequenceChunk& s : batch.seqs) {
    out->hidden_offset.push_back(s.hidden_states ? static_cast<int32_t>(hidden_rows) : -1);
    if (s.hidden_states) {
      out->hidden.resize(static_cast<size_t>((hidden_rows + s.num_tokens) * hidden));
      ops.RmsNorm(x + t * hidden, mw.final_norm.data(), c.rms_norm_eps,
                  out->hidden.data() + hidden_rows * hidden, s.num_tokens, hidden);
      hidden_rows += s.num_tokens;
    }
    t += s.num_tokens;
  }
  out->hidden_size = static_cast<int32_t>(hidden);
}

void BeginDecoderStage(const LoadedModel& model, const ForwardBatch& batch, ForwardOps& ops,
                       float* x) {
  if (model.weights.layer_begin == 0) {
    ops.Embed(model.weights.embed, batch.token_ids, x);
    return;
  }
  ops.ReceiveStageInput(x, static_cast<int64_t>(batch.token_ids.size()) * model.config.hidden_size);
}

void EndDecoderStage(const LoadedModel& model, const ForwardBatch& batch, ForwardOps& ops,
                     const float* x, int logit_in_slot, ForwardOutput* out) {
  const ModelWeights& mw = model.weights;
  if (mw.layer_begin + static_cast<int>(mw.layers.size()) == model.config.num_layers) {
    EmitDecoderOutputs(model, batch, ops, x, logit_in_slot, out);
    return;
  }
  ops.SendStageOutput(x, static_cast<int64_t>(batch.token_ids.size()) * model.config.hidden_size);
}

void ForwardDecoder(const LoadedModel& model, const ForwardBatch& batch, ForwardOps& ops,
                    ForwardOutput* out) {
  const ModelConfig& c = model.config;
  const ModelWeights& mw = model.weights;
  const int64_t t_count = static_cast<int64_t>(batch.token_ids.size());
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  const int64_t qd = c.q_dim(), kvd = c.kv_dim();
  float* x = ops.Scratch(kX, t_count * hidden);
  float* h = ops.Scratch(kH, t_count * hidden);
  float* proj = ops.Scratch(kProj, t_count * hidden);
  float* q = ops.Scratch(kQ, t_count * qd);
  float* attn = ops.Scratch(kAttn, t_count * qd);
  float* k = ops.Scratch(kK, t_count * kvd);
  float* v = ops.Scratch(kV, t_count * kvd);
  float* gate = ops.Scratch(kGate, t_count * inter);
  float* up = ops.Scratch(kUp, t_count * inter);

  BeginDecoderStage(model, batch, ops, x);
  for (size_t i = 0; i < mw.layers.size(); ++i) {
    const int l = mw.layer_begin + static_cast<int>(i);  // the model's layer index
    const LayerWeights& w = mw.layers[i];
    // Attention.
    ops.RmsNorm(x, w.attn_norm.data(), c.rms_norm_eps, h, t_count, hidden);
    const MatMulOutput qkv[] = {{&w.wq, q}, {&w.wk, k}, {&w.wv, v}};
    ops.MatMul(qkv, h, t_count);
    if (!w.bq.empty()) {
      ops.AddBias(q, w.bq.data(), t_count, qd);
      ops.AddBias(k, w.bk.data(), t_count, kvd);
      ops.AddBias(v, w.bv.data(), t_count, kvd);
    }
    if (!w.q_norm.empty()) {  // Qwen3: RMSNorm of each head's [head_dim] q and k, in place
      ops.RmsNorm(q, w.q_norm.data(), c.rms_norm_eps, q, t_count * c.num_heads, c.head_dim);
      ops.RmsNorm(k, w.k_norm.data(), c.rms_norm_eps, k, t_count * c.num_kv_heads, c.head_dim);
    }
    ops.Rope(l, batch, q, c.num_heads, k, c.num_kv_heads);
    ops.WriteKv(l, batch, k, v);
    ops.PagedAttention(l, batch, q, attn);
    const MatMulOutput o[] = {{&w.wo, proj}};
    ops.MatMul(o, attn, t_count);
    ops.AddAllReduced(x, proj, t_count * hidden);
    // SwiGLU MLP, or the experts of a sparse layer.
    ops.RmsNorm(x, w.ffn_norm.data(), c.rms_norm_eps, h, t_count, hidden);
    if (c.moe.IsSparseLayer(l)) {
      // Under tensor parallelism each rank holds a share of every expert's columns (and routes
      // from the replicated h, so all ranks pick the same experts): partial sums, like down.
      ops.MoeFfn(w.moe, c.moe, h, proj, t_count);
      ops.AddAllReduced(x, proj, t_count * hidden);
      continue;
    }
    const MatMulOutput gate_up[] = {{&w.w_gate, gate}, {&w.w_up, up}};
    ops.MatMul(gate_up, h, t_count);
    ops.SiluMul(gate, up, gate, t_count * inter);
    const MatMulOutput down[] = {{&w.w_down, proj}};
    ops.MatMul(down, gate, t_count);
    ops.AddAllReduced(x, proj, t_count * hidden);
  }

  EndDecoderStage(model, batch, ops, x, kLogitIn, out);
}

}  // namespace pagellm
