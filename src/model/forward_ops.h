// The device operations a model graph (model/decoder_graph.h) is written against. A backend
// implements them once (backend/cpu_ops.h for the host kernels); every architecture's graph then
// runs on it unchanged. Activation pointers come from Scratch and live in the backend's memory:
// the graph only offsets them and passes them back, it never reads them. Weights are the
// model's own WeightMatrix / float vectors; a backend maps them to its copies (packed layouts,
// device memory) by address. One call covers all tokens of a step, so dispatch costs one
// virtual call per op per layer.
#pragma once

#include <cstdint>
#include <span>

#include "base/forward_batch.h"
#include "kernels/matmul.h"
#include "kernels/weight_matrix.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "pagellm/check.h"

namespace pagellm {

class ForwardOps {
 public:
  virtual ~ForwardOps() = default;

  // An activation buffer of at least `floats` floats for scratch slot `slot` (0..15), kept and
  // grown across steps; its contents are undefined until the graph writes them.
  virtual float* Scratch(int slot, int64_t floats) = 0;

  // x [ids.size()][table.cols] = rows `ids` of the embedding table, as float.
  virtual void Embed(const WeightMatrix& table, std::span<const int32_t> ids, float* x) = 0;
  // out[r] = x[r] / rms(x[r]) * weight for `rows` rows of `dim` floats; weight [dim]. out may
  // be x (in place).
  virtual void RmsNorm(const float* x, const float* weight, float eps, float* out, int64_t rows,
                       int64_t dim) = 0;
  // y_i [rows][w_i.rows] = x [rows][cols] · w_iᵀ for 1..kMaxMatMulOutputs matrices of one width
  // (dtypes may differ), sharing one pass over x.
  virtual void MatMul(std::span<const MatMulOutput> outs, const float* x, int64_t rows) = 0;
  // x[r] += bias for `rows` rows of `dim` floats; bias [dim].
  virtual void AddBias(float* x, const float* bias, int64_t rows, int64_t dim) = 0;
  // x += y over n floats (the residual add).
  virtual void Add(float* x, const float* y, int64_t n) = 0;
  // x += Σ over the ranks of a tensor-parallel group of their y [n] (the residual add of a
  // projection whose input columns are split across ranks: attention output, MLP down), summed
  // in rank order; y is overwritten. One rank (no group): Add(x, y, n).
  virtual void AddAllReduced(float* x, float* y, int64_t n) = 0;
  // y [n] = the sum of every rank's partial y, in rank order (for a projection that must be
  // whole before it is normed, as Gemma's post-norms need). One rank (no group): unchanged.
  virtual void AllReduce(float* y, int64_t n) = 0;
  // out = silu(gate) ⊙ up over n floats (out may alias gate).
  virtual void SiluMul(const float* gate, const float* up, float* out, int64_t n) = 0;
  // out = gelu_tanh(gate) ⊙ up over n floats (out may alias gate); gelu_tanh(g) =
  // g/2 · (1 + tanh(sqrt(2/pi) · (g + 0.044715 g³))) (Gemma's GeGLU).
  virtual void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) = 0;
  // x *= s over n floats.
  virtual void Scale(float* x, float s, int64_t n) = 0;

  // out [rows][hidden] = the mixture-of-experts FFN (MoeConfig's rule) of the normed input
  // h [rows][hidden]. Bitwise batch-invariant: a row's result depends only on that row.
  virtual void MoeFfn(const MoeWeights& w, const MoeConfig& config, const float* h, float* out,
                      int64_t rows) = 0;

  // Rotary embedding in place at each token's position (batch order), with `layer`'s RoPE
  // (ModelConfig::LayerUsesLocalRope): q [T][q_heads][head_dim], k [T][kv_heads][head_dim].
  virtual void Rope(int layer, const ForwardBatch& batch, float* q, int q_heads, float* k,
                    int kv_heads) = 0;
  // Stores each token's K and V ([T][kv_heads][head_dim]) into its slot of `layer`'s paged
  // cache (block_table[pos / block_size], pos % block_size), in the layer's KV format.
  virtual void WriteKv(int layer, const ForwardBatch& batch, const float* k, const float* v) = 0;
  // out [T][q_dim] = causal attention of q [T][q_dim] over `layer`'s paged cache (after
  // WriteKv of this step's tokens), with the layer's window (ModelConfig::LayerWindow), the
  // model's score scale and soft-cap.
  virtual void PagedAttention(int layer, const ForwardBatch& batch, const float* q, float* out) = 0;
  // out->logits [rows][vocab] = x [rows][hidden] · lm_headᵀ in host memory; sets vocab_size.
  virtual void Logits(const WeightMatrix& lm_head, const float* x, int64_t rows,
                      ForwardOutput* out) = 0;

  // Pipeline parallelism (model/pipeline_stage.h): a stage after the first starts from x [n],
  // the residual stream the previous stage's last layer produced for this batch; a stage before
  // the last hands its own on. Only the ops of a pipeline stage (backend/pipeline_stage_ops.h)
  // implement them; a whole model never calls them.
  virtual void ReceiveStageInput(float* /*x*/, int64_t /*n*/) {
    CHECK(false) << "ReceiveStageInput outside a pipeline stage";
  }
  virtual void SendStageOutput(const float* /*x*/, int64_t /*n*/) {
    CHECK(false) << "SendStageOutput outside a pipeline stage";
  }
};

}  // namespace pagellm
