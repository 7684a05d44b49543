#include "model/gemma_graph.h"

#include "model/decoder_graph.h"

namespace pagellm {
namespace {

// Scratch slots of ForwardGemma.
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

int64_t GemmaActivationFloats(const ModelConfig& c, int64_t t, int64_t rows) {
  return t * (3 * int64_t{c.hidden_size} + 2 * c.q_dim() + 2 * c.kv_dim() +
              2 * int64_t{c.intermediate_size}) +
         rows * (int64_t{c.hidden_size} + c.vocab_size);
}

void ForwardGemma(const LoadedModel& model, const ForwardBatch& batch, ForwardOps& ops,
                  ForwardOutput* out) {
  const ModelConfig& c = model.config;
  const ModelWeights& mw = model.weights;
  const int64_t t_count = static_cast<int64_t>(batch.token_ids.size());
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  const int64_t qd = c.q_dim(), kvd = c.kv_dim();
  const float eps = c.rms_norm_eps;
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
  if (mw.layer_begin == 0) ops.Scale(x, c.embedding_scale, t_count * hidden);
  for (size_t i = 0; i < mw.layers.size(); ++i) {
    const int l = mw.layer_begin + static_cast<int>(i);  // the model's layer index
    const LayerWeights& w = mw.layers[i];
    // Attention, its output normed before the residual add.
    ops.RmsNorm(x, w.attn_norm.data(), eps, h, t_count, hidden);
    const MatMulOutput qkv[] = {{&w.wq, q}, {&w.wk, k}, {&w.wv, v}};
    ops.MatMul(qkv, h, t_count);
    if (!w.q_norm.empty()) {  // Gemma 3: RMSNorm of each head's [head_dim] q and k, in place
      ops.RmsNorm(q, w.q_norm.data(), eps, q, t_count * c.num_heads, c.head_dim);
      ops.RmsNorm(k, w.k_norm.data(), eps, k, t_count * c.num_kv_heads, c.head_dim);
    }
    ops.Rope(l, batch, q, c.num_heads, k, c.num_kv_heads);
    ops.WriteKv(l, batch, k, v);
    ops.PagedAttention(l, batch, q, attn);
    const MatMulOutput o[] = {{&w.wo, proj}};
    ops.MatMul(o, attn, t_count);
    ops.AllReduce(proj, t_count * hidden);  // whole before its norm under tensor parallelism
    ops.RmsNorm(proj, w.post_attn_norm.data(), eps, proj, t_count, hidden);
    ops.Add(x, proj, t_count * hidden);
    // GeGLU MLP, its output normed before the residual add.
    ops.RmsNorm(x, w.ffn_norm.data(), eps, h, t_count, hidden);
    const MatMulOutput gate_up[] = {{&w.w_gate, gate}, {&w.w_up, up}};
    ops.MatMul(gate_up, h, t_count);
    ops.GeluTanhMul(gate, up, gate, t_count * inter);
    const MatMulOutput down[] = {{&w.w_down, proj}};
    ops.MatMul(down, gate, t_count);
    ops.AllReduce(proj, t_count * hidden);
    ops.RmsNorm(proj, w.post_ffn_norm.data(), eps, proj, t_count, hidden);
    ops.Add(x, proj, t_count * hidden);
  }
  EndDecoderStage(model, batch, ops, x, kLogitIn, out);
}

}  // namespace pagellm
