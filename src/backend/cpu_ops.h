// ForwardOps (model/forward_ops.h) on the host kernels (kernels/): activations in std::vector
// scratch, matrices through their load-time packed copies, KV in a KvCacheStorage. Every op
// runs at one SIMD level (base/cpu_features.h), fixed at construction: the active level in
// production, a forced one when a test compares levels.
#pragma once

#include <array>
#include <unordered_map>
#include <vector>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "kernels/packed_weights.h"
#include "kernels/paged_attention.h"
#include "kernels/rope.h"
#include "kv/kv_cache_storage.h"
#include "model/forward_ops.h"
#include "model/model_weights.h"

namespace pagellm {

class CpuOps : public ForwardOps {
 public:
  // Packs every matrix of `model` for the kernels of the active level. `model` and `pool` must
  // outlive the ops (pool may be null); max_positions bounds the RoPE table.
  CpuOps(const LoadedModel& model, ThreadPool* pool, int max_positions, SimdLevel level);

  // The cache WriteKv and PagedAttention use (must outlive the ops); before Forward.
  void BindKvCache(KvCacheStorage* kv);
  const RopeTable& rope() const { return rope_; }

  float* Scratch(int slot, int64_t floats) override;
  void Embed(const WeightMatrix& table, std::span<const int32_t> ids, float* x) override;
  void RmsNorm(const float* x, const float* weight, float eps, float* out, int64_t rows,
               int64_t dim) override;
  void MatMul(std::span<const MatMulOutput> outs, const float* x, int64_t rows) override;
  void AddBias(float* x, const float* bias, int64_t rows, int64_t dim) override;
  void Add(float* x, const float* y, int64_t n) override;
  void AddAllReduced(float* x, float* y, int64_t n) override { Add(x, y, n); }
  void AllReduce(float* /*y*/, int64_t /*n*/) override {}
  void SiluMul(const float* gate, const float* up, float* out, int64_t n) override;
  void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) override;
  void Scale(float* x, float s, int64_t n) override;
  void MoeFfn(const MoeWeights& w, const MoeConfig& config, const float* h, float* out,
              int64_t rows) override;
  void Rope(int layer, const ForwardBatch& batch, float* q, int q_heads, float* k,
            int kv_heads) override;
  void WriteKv(int layer, const ForwardBatch& batch, const float* k, const float* v) override;
  void PagedAttention(int layer, const ForwardBatch& batch, const float* q, float* out) override;
  void Logits(const WeightMatrix& lm_head, const float* x, int64_t rows,
              ForwardOutput* out) override;

 private:
  // The cache's layers are the model's from layer_begin_ on (a pipeline stage holds some):
  // `kv_layer` below is a layer of the cache, `layer` of the model.
  // Stores one token's K and V ([kv_heads][head_dim] floats each) into (block, slot) of
  // `kv_layer`, quantising to the layer's KV format.
  void WriteKvSlot(int kv_layer, int block, int slot, const float* k, const float* v);
  KvLayerView LayerView(int kv_layer) const;
  // The block table of `kv_layer`'s KV cache group for chunk s.
  std::span<const int32_t> LayerTable(int kv_layer, const SequenceChunk& s) const {
    return s.group_block_tables.empty()
               ? s.block_table
               : std::span<const int32_t>(s.group_block_tables[kv_->shape().group(kv_layer)]);
  }

  const ModelConfig& config_;
  const int layer_begin_;  // ModelWeights::layer_begin
  ThreadPool* pool_;
  SimdLevel level_;
  RopeTable rope_;
  // The local layers' table (Gemma 3); empty unless ModelConfig::rope_local_theta is set.
  RopeTable rope_local_;
  // Load-time packed copies of the matrices for the MatMul kernels (empty when unused).
  PackedWeights packed_;
  // Per layer: the shared shape with the layer's sliding window.
  std::vector<AttentionShape> attn_shape_;
  KvCacheStorage* kv_ = nullptr;
  std::array<std::vector<float>, 16> scratch_;  // grown on demand, reused across steps
  std::vector<float> rot_;  // [head_dim] smoothing / rotation scratch for KV writes
  // The batch's chunks with the block tables of one KV cache group, for the attention kernel.
  std::vector<SequenceChunk> group_seqs_;
  // MoeFfn's buffers (DecoderActivationFloats counts them): router logits [T][E], routing
  // [T][k] ids and weights, the rows of one expert (input [n][hidden], gate and up
  // [n][inter]), every (token, slot)'s expert output [T][k][hidden], and for each expert its
  // (token, slot) entries in token order (order_, bucketed by start_).
  std::vector<float> moe_logits_, moe_weights_, moe_x_, moe_gate_, moe_up_, moe_y_;
  std::vector<int32_t> moe_ids_, moe_order_;
  std::vector<int64_t> moe_start_;
  // The order of MatMul calls, learned as they come (a decode step repeats it): notes `call`
  // (this call's packed matrices) and returns the call that followed it last time, keyed by
  // its first matrix, so that idle threads can read ahead into it (MatMulNext).
  MatMulNext NoteMatMul(const MatMulNext& call);
  std::unordered_map<const WeightMatrix*, MatMulNext> next_matmul_;
  const WeightMatrix* last_matmul_ = nullptr;
};

}  // namespace pagellm
