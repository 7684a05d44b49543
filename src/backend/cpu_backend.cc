#include "backend/cpu_backend.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quantize.h"

namespace pagellm {

CpuBackend::CpuBackend(const LoadedModel& model, KvCacheStorage* kv, ThreadPool* pool,
                       int max_positions)
    : model_(model),
      config_(model.config),
      kv_(kv),
      pool_(pool),
      rope_(model.config, max_positions) {
  attn_shape_.num_heads = config_.num_heads;
  attn_shape_.num_kv_heads = config_.num_kv_heads;
  attn_shape_.head_dim = config_.head_dim;
  attn_shape_.block_size = kv->shape().block_size;
  attn_shape_.scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  attn_shape_.sliding_window = config_.sliding_window;
}

int64_t CpuBackend::ActivationBytes(const ModelConfig& c, int64_t t, int64_t rows) {
  const int64_t floats = t * (3 * int64_t{c.hidden_size} + 2 * c.q_dim() + 2 * c.kv_dim() +
                              2 * int64_t{c.intermediate_size}) +
                         rows * (int64_t{c.hidden_size} + c.vocab_size);
  return floats * static_cast<int64_t>(sizeof(float));
}

Status CpuBackend::ValidateBatch(const ForwardBatch& batch) const {
  int64_t total = 0;
  const KvCacheShape& kv = kv_->shape();
  for (const SequenceChunk& s : batch.seqs) {
    if (s.num_tokens < 1 || s.start_pos < 0) return InvalidArgumentError("empty sequence chunk");
    const int64_t end = int64_t{s.start_pos} + s.num_tokens;
    if (end > rope_.max_positions())
      return OutOfRangeError(fmt::format("position {} beyond max {}", end, rope_.max_positions()));
    if (static_cast<int64_t>(s.block_table.size()) * kv.block_size < end)
      return InvalidArgumentError("block table too short for sequence");
    for (int32_t b : s.block_table)
      if (b <= 0 || b >= kv.num_blocks) return InvalidArgumentError(fmt::format("bad block {}", b));
    total += s.num_tokens;
  }
  if (total != static_cast<int64_t>(batch.token_ids.size()))
    return InvalidArgumentError("token count does not match sequence chunks");
  for (int32_t id : batch.token_ids)
    if (id < 0 || id >= config_.vocab_size)
      return InvalidArgumentError(fmt::format("token id {} outside vocabulary", id));
  return Status::Ok();
}

void CpuBackend::EmbedTokens(const std::vector<int32_t>& ids) {
  const int64_t hidden = config_.hidden_size;
  const WeightMatrix& e = model_.weights.embed;
  for (size_t t = 0; t < ids.size(); ++t)
    DequantizeRow(e.dtype, e.row(ids[t]), x_.data() + t * hidden, hidden);
}

void CpuBackend::AttentionBlock(int layer, const ForwardBatch& batch) {
  const LayerWeights& w = model_.weights.layers[layer];
  const int64_t t_count = static_cast<int64_t>(batch.token_ids.size());
  const int64_t hidden = config_.hidden_size, qd = config_.q_dim(), kvd = config_.kv_dim();

  RmsNorm(x_.data(), w.attn_norm.data(), config_.rms_norm_eps, h_.data(), t_count, hidden);
  MatMul(w.wq, h_.data(), t_count, q_.data(), pool_);
  MatMul(w.wk, h_.data(), t_count, k_.data(), pool_);
  MatMul(w.wv, h_.data(), t_count, v_.data(), pool_);
  if (!w.bq.empty()) {
    for (int64_t t = 0; t < t_count; ++t) {
      AddInPlace(q_.data() + t * qd, w.bq.data(), qd);
      AddInPlace(k_.data() + t * kvd, w.bk.data(), kvd);
      AddInPlace(v_.data() + t * kvd, w.bv.data(), kvd);
    }
  }
  // RoPE and KV write, token by token (positions differ per sequence).
  const int block_size = kv_->shape().block_size;
  int64_t t = 0;
  for (const SequenceChunk& s : batch.seqs) {
    for (int i = 0; i < s.num_tokens; ++i, ++t) {
      const int pos = s.start_pos + i;
      rope_.Apply(q_.data() + t * qd, config_.num_heads, pos);
      rope_.Apply(k_.data() + t * kvd, config_.num_kv_heads, pos);
      const int block = s.block_table[pos / block_size];
      const int slot = pos % block_size;
      std::copy_n(k_.data() + t * kvd, kvd, kv_->k_slot(layer, block, slot));
      std::copy_n(v_.data() + t * kvd, kvd, kv_->v_slot(layer, block, slot));
    }
  }
  PagedAttention(attn_shape_, q_.data(), kv_->k(layer), kv_->v(layer), batch.seqs, attn_.data(),
                 pool_);
  MatMul(w.wo, attn_.data(), t_count, proj_.data(), pool_);
  AddInPlace(x_.data(), proj_.data(), t_count * hidden);
}

void CpuBackend::FeedForwardBlock(int layer, int64_t t_count) {
  const LayerWeights& w = model_.weights.layers[layer];
  const int64_t hidden = config_.hidden_size, inter = config_.intermediate_size;
  RmsNorm(x_.data(), w.ffn_norm.data(), config_.rms_norm_eps, h_.data(), t_count, hidden);
  MatMul(w.w_gate, h_.data(), t_count, gate_.data(), pool_);
  MatMul(w.w_up, h_.data(), t_count, up_.data(), pool_);
  SiluMul(gate_.data(), up_.data(), gate_.data(), t_count * inter);
  MatMul(w.w_down, gate_.data(), t_count, proj_.data(), pool_);
  AddInPlace(x_.data(), proj_.data(), t_count * hidden);
}

Status CpuBackend::Forward(const ForwardBatch& batch, ForwardOutput* out) {
  RETURN_IF_ERROR(ValidateBatch(batch));
  const int64_t t_count = static_cast<int64_t>(batch.token_ids.size());
  const int64_t hidden = config_.hidden_size, inter = config_.intermediate_size;
  auto grow = [](std::vector<float>& v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(n);
  };
  grow(x_, t_count * hidden);
  grow(h_, t_count * hidden);
  grow(proj_, t_count * hidden);
  grow(q_, t_count * config_.q_dim());
  grow(attn_, t_count * config_.q_dim());
  grow(k_, t_count * config_.kv_dim());
  grow(v_, t_count * config_.kv_dim());
  grow(gate_, t_count * inter);
  grow(up_, t_count * inter);

  EmbedTokens(batch.token_ids);
  for (int l = 0; l < config_.num_layers; ++l) {
    AttentionBlock(l, batch);
    FeedForwardBlock(l, t_count);
  }

  // Gather the rows that need logits, normalise them and project to the vocabulary.
  out->row_offset.clear();
  int64_t rows = 0, t = 0;
  for (const SequenceChunk& s : batch.seqs) {
    out->row_offset.push_back(static_cast<int32_t>(rows));
    rows += s.all_logits ? s.num_tokens : 1;
  }
  grow(logit_in_, rows * hidden);
  int64_t r = 0;
  for (const SequenceChunk& s : batch.seqs) {
    const int64_t first = s.all_logits ? t : t + s.num_tokens - 1;
    const int64_t n = s.all_logits ? s.num_tokens : 1;
    RmsNorm(x_.data() + first * hidden, model_.weights.final_norm.data(), config_.rms_norm_eps,
            logit_in_.data() + r * hidden, n, hidden);
    r += n;
    t += s.num_tokens;
  }
  out->vocab_size = config_.vocab_size;
  out->logits.resize(static_cast<size_t>(rows) * config_.vocab_size);
  MatMul(model_.weights.lm_head, logit_in_.data(), rows, out->logits.data(), pool_);
  return Status::Ok();
}

}  // namespace pagellm
