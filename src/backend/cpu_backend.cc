#include "backend/cpu_backend.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"
#include "kernels/kv_quant.h"
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
      rope_(model.config.rope_params(), max_positions) {
  attn_shape_.num_heads = config_.num_heads;
  attn_shape_.num_kv_heads = config_.num_kv_heads;
  attn_shape_.head_dim = config_.head_dim;
  attn_shape_.block_size = kv->shape().block_size;
  attn_shape_.scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  attn_shape_.sliding_window = config_.sliding_window;
  for (const LayerWeights& l : model.weights.layers) {
    for (const WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      packed_.Add(*w, pool);
  }
  packed_.Add(model.weights.lm_head, pool);
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
  MatMulMany({{&packed_.Get(w.wq), q_.data()},
              {&packed_.Get(w.wk), k_.data()},
              {&packed_.Get(w.wv), v_.data()}},
             h_.data(), t_count, pool_);
  if (!w.bq.empty()) {
    for (int64_t t = 0; t < t_count; ++t) {
      AddInPlace(q_.data() + t * qd, w.bq.data(), qd);
      AddInPlace(k_.data() + t * kvd, w.bk.data(), kvd);
      AddInPlace(v_.data() + t * kvd, w.bv.data(), kvd);
    }
  }
  // RoPE, then the KV write token by token (positions differ per sequence).
  const int block_size = kv_->shape().block_size;
  int64_t t = 0;
  for (const SequenceChunk& s : batch.seqs) {
    for (int i = 0; i < s.num_tokens; ++i, ++t) {
      const int pos = s.start_pos + i;
      rope_.Apply(q_.data() + t * qd, config_.num_heads, pos);
      rope_.Apply(k_.data() + t * kvd, config_.num_kv_heads, pos);
    }
  }
  t = 0;
  for (const SequenceChunk& s : batch.seqs) {
    for (int i = 0; i < s.num_tokens; ++i, ++t) {
      const int pos = s.start_pos + i;
      WriteKv(layer, s.block_table[pos / block_size], pos % block_size, k_.data() + t * kvd,
              v_.data() + t * kvd);
    }
  }
  PagedAttention(attn_shape_, q_.data(), LayerView(layer), batch.seqs, attn_.data(), pool_);
  MatMul(packed_.Get(w.wo), attn_.data(), t_count, proj_.data(), pool_);
  AddInPlace(x_.data(), proj_.data(), t_count * hidden);
}

KvLayerView CpuBackend::LayerView(int layer) const {
  KvLayerView v;
  v.dtype = kv_->layer_dtype(layer);
  v.k = kv_->k_bytes(layer);
  v.v = kv_->v_bytes(layer);
  v.row_bytes = kv_->row_bytes(layer);
  v.k_scale = kv_->k_scale(layer);
  v.v_scale = kv_->v_scale(layer);
  v.rotated = KvRowsRotated(v.dtype, config_.head_dim);
  v.k_smooth = kv_->k_smooth(layer);
  return v;
}

void CpuBackend::WriteKv(int layer, int block, int slot, const float* k, const float* v) {
  const KvCacheDtype dtype = kv_->layer_dtype(layer);
  const int64_t kvd = config_.kv_dim();
  if (dtype == KvCacheDtype::kFloat32) {
    std::copy_n(k, kvd, kv_->k_slot(layer, block, slot));
    std::copy_n(v, kvd, kv_->v_slot(layer, block, slot));
    return;
  }
  // Quantise on write, one (token, head) row at a time (kv/kv_quant.h).
  const int d = config_.head_dim;
  const int64_t row = kv_->row_bytes(layer);
  const bool rotate = KvRowsRotated(dtype, d);
  const bool smoothed = kv_->k_smoothed(layer);
  uint8_t* kd = kv_->k_slot_bytes(layer, block, slot);
  uint8_t* vd = kv_->v_slot_bytes(layer, block, slot);
  rot_.resize(d);
  for (int h = 0; h < config_.num_kv_heads; ++h) {
    for (int kvi = 0; kvi < 2; ++kvi) {
      const float* src = (kvi == 0 ? k : v) + int64_t{h} * d;
      if (kvi == 0 && smoothed) {
        // K' = (K - c) / s per channel (kv/kv_cache_storage.h); attention scales q by s.
        const float* c = kv_->k_offset(layer) + int64_t{h} * d;
        const float* sm = kv_->k_smooth(layer) + int64_t{h} * d;
        for (int x = 0; x < d; ++x) rot_[x] = (src[x] - c[x]) / sm[x];
        src = rot_.data();
      }
      if (rotate) {
        if (src != rot_.data()) std::copy_n(src, d, rot_.data());
        HadamardRotate(rot_.data(), d);
        src = rot_.data();
      }
      QuantizeKvRow(dtype, src, d, kvi == 0 ? kv_->k_scale(layer) : kv_->v_scale(layer),
                    (kvi == 0 ? kd : vd) + h * row);
    }
  }
}

void CpuBackend::FeedForwardBlock(int layer, int64_t t_count) {
  const LayerWeights& w = model_.weights.layers[layer];
  const int64_t hidden = config_.hidden_size, inter = config_.intermediate_size;
  RmsNorm(x_.data(), w.ffn_norm.data(), config_.rms_norm_eps, h_.data(), t_count, hidden);
  MatMulMany({{&packed_.Get(w.w_gate), gate_.data()}, {&packed_.Get(w.w_up), up_.data()}},
             h_.data(), t_count, pool_);
  SiluMul(gate_.data(), up_.data(), gate_.data(), t_count * inter);
  MatMul(packed_.Get(w.w_down), gate_.data(), t_count, proj_.data(), pool_);
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
  MatMul(packed_.Get(model_.weights.lm_head), logit_in_.data(), rows, out->logits.data(), pool_);
  return Status::Ok();
}

}  // namespace pagellm
