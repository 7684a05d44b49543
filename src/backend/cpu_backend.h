// The reference CPU forward pass of a Llama-family decoder over a paged KV cache.
//
// Per layer, for the T tokens of a step (all sequences back to back):
//   h = RMSNorm(x) · attn_norm;  q,k,v = h·Wq/Wk/Wv (+bias);  RoPE(q, k) at each token's position
//   K/V written to the token's cache slot;  a = PagedAttention(q, cache);  x += a·Wo
//   h = RMSNorm(x) · ffn_norm;  x += (silu(h·Wgate) ⊙ (h·Wup))·Wdown
// then logits = RMSNorm(x)·final_norm · lm_head for the rows that need them.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "base/thread_pool.h"
#include "kernels/packed_weights.h"
#include "kernels/paged_attention.h"
#include "kernels/rope.h"
#include "kv/kv_cache_storage.h"
#include "model/model_weights.h"

namespace pagellm {

class CpuBackend : public Backend {
 public:
  // `model`, `kv` and `pool` must outlive the backend. max_positions bounds RoPE tables.
  CpuBackend(const LoadedModel& model, KvCacheStorage* kv, ThreadPool* pool, int max_positions);

  Status Forward(const ForwardBatch& batch, ForwardOutput* out) override;

  // Bytes of activation scratch a step of `num_tokens` tokens needs (for memory planning).
  static int64_t ActivationBytes(const ModelConfig& config, int64_t num_tokens,
                                 int64_t num_logit_rows);

 private:
  Status ValidateBatch(const ForwardBatch& batch) const;
  void EmbedTokens(const std::vector<int32_t>& ids);
  void AttentionBlock(int layer, const ForwardBatch& batch);
  void FeedForwardBlock(int layer, int64_t num_tokens);
  // Stores one token's K and V ([kv_heads][head_dim] floats each) into (block, slot) of
  // `layer`, quantising to the layer's KV format.
  void WriteKv(int layer, int block, int slot, const float* k, const float* v);
  KvLayerView LayerView(int layer) const;

  const LoadedModel& model_;
  const ModelConfig& config_;
  KvCacheStorage* kv_;
  ThreadPool* pool_;
  RopeTable rope_;
  // Load-time packed copies of the matrices for the MatMul kernels (empty when unused).
  PackedWeights packed_;
  AttentionShape attn_shape_;
  // Scratch, grown on demand and reused across steps.
  std::vector<float> x_;         // [T][hidden] residual stream
  std::vector<float> h_;         // [T][hidden] normed input
  std::vector<float> q_;         // [T][q_dim]
  std::vector<float> k_;         // [T][kv_dim]
  std::vector<float> v_;         // [T][kv_dim]
  std::vector<float> attn_;      // [T][q_dim]
  std::vector<float> gate_;      // [T][intermediate]
  std::vector<float> up_;        // [T][intermediate]
  std::vector<float> proj_;      // [T][hidden]
  std::vector<float> logit_in_;  // [rows][hidden]
  std::vector<float> rot_;       // [head_dim] smoothing / rotation scratch for KV writes
};

}  // namespace pagellm
