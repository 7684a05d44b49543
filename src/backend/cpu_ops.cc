#include "backend/cpu_ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/kv_quant.h"
#include "kernels/moe_routing.h"
#include "kernels/ops.h"
#include "kernels/quantize.h"
#include "pagellm/check.h"

namespace pagellm {

CpuOps::CpuOps(const LoadedModel& model, ThreadPool* pool, int max_positions, SimdLevel level)
    : config_(model.config),
      layer_begin_(model.weights.layer_begin),
      pool_(pool),
      level_(level),
      rope_(model.config.rope_params(), max_positions) {
  if (config_.rope_local_theta > 0.0f)
    rope_local_ = RopeTable(config_.rope_local_params(), max_positions);
  AttentionShape shape;
  shape.num_heads = config_.num_heads;
  shape.num_kv_heads = config_.num_kv_heads;
  shape.head_dim = config_.head_dim;
  shape.scale = config_.AttentionScale();
  shape.softcap = config_.attn_logit_softcap;
  attn_shape_.assign(config_.num_layers, shape);
  for (int l = 0; l < config_.num_layers; ++l)
    attn_shape_[l].sliding_window = config_.LayerWindow(l);
  // In the order a decode step reads them (one arena, PackedWeights).
  std::vector<const WeightMatrix*> matrices;
  for (const LayerWeights& l : model.weights.layers) {
    for (const WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      matrices.push_back(w);
    const MoeWeights& m = l.moe;  // empty in dense layers (AddAll skips empty matrices)
    for (const WeightMatrix* w : {&m.router, &m.shared_gate, &m.shared_up, &m.shared_down})
      matrices.push_back(w);
    for (const auto* experts : {&m.gate, &m.up, &m.down})
      for (const WeightMatrix& w : *experts) matrices.push_back(&w);
  }
  matrices.push_back(&model.weights.lm_head);
  packed_.AddAll(matrices, pool);
}

void CpuOps::BindKvCache(KvCacheStorage* kv) {
  kv_ = kv;
  for (AttentionShape& s : attn_shape_) s.block_size = kv->shape().block_size;
}

float* CpuOps::Scratch(int slot, int64_t floats) {
  std::vector<float>& v = scratch_.at(slot);
  if (static_cast<int64_t>(v.size()) < floats) v.resize(floats);
  return v.data();
}

void CpuOps::Embed(const WeightMatrix& e, std::span<const int32_t> ids, float* x) {
  const int64_t hidden = e.cols;
  for (size_t t = 0; t < ids.size(); ++t)
    DequantizeRow(e.dtype, e.row(ids[t]), x + t * hidden, hidden);
}

void CpuOps::RmsNorm(const float* x, const float* weight, float eps, float* out, int64_t rows,
                     int64_t dim) {
  RmsNormAtLevel(level_, x, weight, eps, out, rows, dim);
}

MatMulNext CpuOps::NoteMatMul(const MatMulNext& call) {
  if (last_matmul_ != nullptr) next_matmul_[last_matmul_] = call;
  last_matmul_ = call.w[0];
  const auto it = next_matmul_.find(call.w[0]);
  return it == next_matmul_.end() ? MatMulNext{} : it->second;
}

void CpuOps::MatMul(std::span<const MatMulOutput> outs, const float* x, int64_t rows) {
  CHECK_LE(outs.size(), static_cast<size_t>(kMaxMatMulOutputs));
  // The packed copies, looked up once per matrix (a hash lookup each).
  MatMulNext call;
  for (const MatMulOutput& o : outs) call.w[call.count++] = &packed_.Get(*o.w);
  auto p = [&](size_t i) { return MatMulOutput{call.w[i], outs[i].y}; };
  const MatMulNext next = NoteMatMul(call);
  switch (outs.size()) {
    case 1:
      MatMulAtLevel(level_, *p(0).w, x, rows, outs[0].y, pool_, next);
      return;
    case 2:
      MatMulManyAtLevel(level_, {p(0), p(1)}, x, rows, pool_, next);
      return;
    case 3:
      MatMulManyAtLevel(level_, {p(0), p(1), p(2)}, x, rows, pool_, next);
      return;
    case 4:
      MatMulManyAtLevel(level_, {p(0), p(1), p(2), p(3)}, x, rows, pool_, next);
      return;
  }
  CHECK(false) << "MatMul of " << outs.size() << " matrices";
}

void CpuOps::AddBias(float* x, const float* bias, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) AddInPlaceAtLevel(level_, x + r * dim, bias, dim);
}

void CpuOps::Add(float* x, const float* y, int64_t n) {
  AddInPlaceAtLevel(level_, x, y, n);
}

void CpuOps::SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  SiluMulAtLevel(level_, gate, up, out, n);
}

void CpuOps::GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) {
  GeluTanhMulAtLevel(level_, gate, up, out, n);
}

void CpuOps::Scale(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void CpuOps::MoeFfn(const MoeWeights& w, const MoeConfig& c, const float* h, float* out,
                    int64_t rows) {
  const int64_t hidden = w.router.cols;
  const int n_exp = c.num_experts, k = c.num_experts_per_tok;
  const int64_t inter = c.expert_intermediate;
  const int64_t slots = rows * k;
  auto grow = [](auto& v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(n);
    return v.data();
  };
  float* logits = grow(moe_logits_, rows * n_exp);
  int32_t* ids = grow(moe_ids_, slots);
  float* weights = grow(moe_weights_, slots);
  float* y = grow(moe_y_, slots * hidden);
  MatMulAtLevel(level_, packed_.Get(w.router), h, rows, logits, pool_);
  RouteTopK(logits, rows, n_exp, k, c.norm_topk_prob, ids, weights);

  // Bucket the (token, slot) entries by expert, in token order (a counting sort).
  int64_t* start = grow(moe_start_, n_exp + 1);
  int32_t* order = grow(moe_order_, slots);
  std::fill(start, start + n_exp + 1, 0);
  for (int64_t s = 0; s < slots; ++s) ++start[ids[s] + 1];
  for (int e = 0; e < n_exp; ++e) start[e + 1] += start[e];
  for (int64_t s = 0; s < slots; ++s) order[start[ids[s]]++] = static_cast<int32_t>(s);
  for (int e = n_exp; e > 0; --e) start[e] = start[e - 1];
  start[0] = 0;

  // One grouped SwiGLU per expert that has tokens: only those experts' weights are read.
  float* x = grow(moe_x_, rows * std::max(hidden, inter));
  float* gate = grow(moe_gate_, rows * std::max(inter, int64_t{c.shared_expert_intermediate}));
  float* up = grow(moe_up_, rows * std::max(inter, int64_t{c.shared_expert_intermediate}));
  for (int e = 0; e < n_exp; ++e) {
    const int64_t n = start[e + 1] - start[e];
    if (n == 0) continue;
    const int32_t* entries = order + start[e];
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(h + (entries[i] / k) * hidden, hidden, x + i * hidden);
    }
    MatMulManyAtLevel(level_, {{&packed_.Get(w.gate[e]), gate}, {&packed_.Get(w.up[e]), up}}, x, n,
                      pool_);
    SiluMulAtLevel(level_, gate, up, gate, n * inter);
    MatMulAtLevel(level_, packed_.Get(w.down[e]), gate, n, x, pool_);
    for (int64_t i = 0; i < n; ++i) std::copy_n(x + i * hidden, hidden, y + entries[i] * hidden);
  }

  // Each token's weighted sum over its slots, largest weight first: a fixed order per token.
  for (int64_t t = 0; t < rows; ++t) {
    float* o = out + t * hidden;
    const float* yt = y + t * k * hidden;
    const float w0 = weights[t * k];
    for (int64_t i = 0; i < hidden; ++i) o[i] = w0 * yt[i];
    for (int j = 1; j < k; ++j) {
      const float wj = weights[t * k + j];
      const float* yj = yt + j * hidden;
      for (int64_t i = 0; i < hidden; ++i) o[i] += wj * yj[i];
    }
  }
  if (w.shared_expert_gate.empty()) return;
  // Qwen2-MoE: + sigmoid(h · shared_expert_gate) · SwiGLU_shared(h), over all rows at once.
  const int64_t sinter = c.shared_expert_intermediate;
  MatMulManyAtLevel(level_, {{&packed_.Get(w.shared_gate), gate}, {&packed_.Get(w.shared_up), up}},
                    h, rows, pool_);
  SiluMulAtLevel(level_, gate, up, gate, rows * sinter);
  MatMulAtLevel(level_, packed_.Get(w.shared_down), gate, rows, x, pool_);
  for (int64_t t = 0; t < rows; ++t) {
    const float* ht = h + t * hidden;
    float dot = 0.0f;
    for (int64_t i = 0; i < hidden; ++i) dot += ht[i] * w.shared_expert_gate[i];
    const float g = 1.0f / (1.0f + std::exp(-dot));
    float* o = out + t * hidden;
    const float* st = x + t * hidden;
    for (int64_t i = 0; i < hidden; ++i) o[i] += g * st[i];
  }
}

void CpuOps::Rope(int layer, const ForwardBatch& batch, float* q, int q_heads, float* k,
                  int kv_heads) {
  const RopeTable& rope = config_.LayerUsesLocalRope(layer) ? rope_local_ : rope_;
  const int64_t qd = int64_t{q_heads} * config_.head_dim;
  const int64_t kvd = int64_t{kv_heads} * config_.head_dim;
  int64_t t = 0;
  for (const SequenceChunk& s : batch.seqs) {
    for (int i = 0; i < s.num_tokens; ++i, ++t) {
      const int pos = s.start_pos + i;
      rope.Apply(q + t * qd, q_heads, pos);
      rope.Apply(k + t * kvd, kv_heads, pos);
    }
  }
}

void CpuOps::WriteKv(int layer, const ForwardBatch& batch, const float* k, const float* v) {
  const int block_size = kv_->shape().block_size;
  const int64_t kvd = config_.kv_dim();
  const int kv_layer = layer - layer_begin_;
  int64_t t = 0;
  for (const SequenceChunk& s : batch.seqs) {
    const std::span<const int32_t> table = LayerTable(kv_layer, s);
    for (int i = 0; i < s.num_tokens; ++i, ++t) {
      const int pos = s.start_pos + i;
      WriteKvSlot(kv_layer, table[pos / block_size], pos % block_size, k + t * kvd, v + t * kvd);
    }
  }
}

void CpuOps::PagedAttention(int layer, const ForwardBatch& batch, const float* q, float* out) {
  const int kv_layer = layer - layer_begin_;
  if (batch.seqs.empty() || batch.seqs[0].group_block_tables.empty()) {
    PagedAttentionAt(level_, attn_shape_[layer], q, LayerView(kv_layer), batch.seqs, out, pool_);
    return;
  }
  group_seqs_.assign(batch.seqs.begin(), batch.seqs.end());
  for (SequenceChunk& s : group_seqs_) s.block_table = LayerTable(kv_layer, s);
  PagedAttentionAt(level_, attn_shape_[layer], q, LayerView(kv_layer), group_seqs_, out, pool_);
}

void CpuOps::Logits(const WeightMatrix& lm_head, const float* x, int64_t rows, ForwardOutput* out) {
  out->vocab_size = static_cast<int32_t>(lm_head.rows);
  out->logits.resize(static_cast<size_t>(rows) * lm_head.rows);
  const WeightMatrix& w = packed_.Get(lm_head);
  MatMulNext call;
  call.w[call.count++] = &w;
  MatMulAtLevel(level_, w, x, rows, out->logits.data(), pool_, NoteMatMul(call));
}

KvLayerView CpuOps::LayerView(int layer) const {
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

void CpuOps::WriteKvSlot(int layer, int block, int slot, const float* k, const float* v) {
  const KvCacheDtype dtype = kv_->layer_dtype(layer);
  const int d = config_.head_dim;
  if (dtype == KvCacheDtype::kFloat32) {
    for (int h = 0; h < config_.num_kv_heads; ++h) {
      std::copy_n(k + int64_t{h} * d, d, kv_->k_row(layer, block, slot, h));
      std::copy_n(v + int64_t{h} * d, d, kv_->v_row(layer, block, slot, h));
    }
    return;
  }
  // Quantise on write, one (token, head) row at a time (kernels/kv_quant.h).
  const bool rotate = KvRowsRotated(dtype, d);
  const bool smoothed = kv_->k_smoothed(layer);
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
                    kvi == 0 ? kv_->k_row_bytes(layer, block, slot, h)
                             : kv_->v_row_bytes(layer, block, slot, h));
    }
  }
}

}  // namespace pagellm
