// ForwardOps that pass every op to an inner ForwardOps: the base of the ops that wrap a rank's
// own ops with communication (backend/tensor_parallel_ops.h, backend/pipeline_stage_ops.h),
// which override only the ops where ranks meet.
#pragma once

#include <cstdint>
#include <span>

#include "model/forward_ops.h"

namespace pagellm {

class ForwardingOps : public ForwardOps {
 public:
  // `inner` must outlive these ops.
  explicit ForwardingOps(ForwardOps& inner) : inner_(inner) {}

  float* Scratch(int slot, int64_t floats) override { return inner_.Scratch(slot, floats); }
  void Embed(const WeightMatrix& table, std::span<const int32_t> ids, float* x) override {
    inner_.Embed(table, ids, x);
  }
  void RmsNorm(const float* x, const float* weight, float eps, float* out, int64_t rows,
               int64_t dim) override {
    inner_.RmsNorm(x, weight, eps, out, rows, dim);
  }
  void MatMul(std::span<const MatMulOutput> outs, const float* x, int64_t rows) override {
    inner_.MatMul(outs, x, rows);
  }
  void AddBias(float* x, const float* bias, int64_t rows, int64_t dim) override {
    inner_.AddBias(x, bias, rows, dim);
  }
  void Add(float* x, const float* y, int64_t n) override { inner_.Add(x, y, n); }
  void AddAllReduced(float* x, float* y, int64_t n) override { inner_.AddAllReduced(x, y, n); }
  void AllReduce(float* y, int64_t n) override { inner_.AllReduce(y, n); }
  void SiluMul(const float* gate, const float* up, float* out, int64_t n) override {
    inner_.SiluMul(gate, up, out, n);
  }
  void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) override {
    inner_.GeluTanhMul(gate, up, out, n);
  }
  void Scale(float* x, float s, int64_t n) override { inner_.Scale(x, s, n); }
  void MoeFfn(const MoeWeights& w, const MoeConfig& config, const float* h, float* out,
              int64_t rows) override {
    inner_.MoeFfn(w, config, h, out, rows);
  }
  void Rope(int layer, const ForwardBatch& batch, float* q, int q_heads, float* k,
            int kv_heads) override {
    inner_.Rope(layer, batch, q, q_heads, k, kv_heads);
  }
  void WriteKv(int layer, const ForwardBatch& batch, const float* k, const float* v) override {
    inner_.WriteKv(layer, batch, k, v);
  }
  void PagedAttention(int layer, const ForwardBatch& batch, const float* q, float* out) override {
    inner_.PagedAttention(layer, batch, q, out);
  }
  void Logits(const WeightMatrix& lm_head, const float* x, int64_t rows,
              ForwardOutput* out) override {
    inner_.Logits(lm_head, x, rows, out);
  }
  void ReceiveStageInput(float* x, int64_t n) override { inner_.ReceiveStageInput(x, n); }
  void SendStageOutput(const float* x, int64_t n) override { inner_.SendStageOutput(x, n); }

 protected:
  ForwardOps& inner_;
};

}  // namespace pagellm
