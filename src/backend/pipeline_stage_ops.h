// The ForwardOps of one rank of a pipeline stage: the rank's own ops (CpuOps, or
// TensorParallelOps when the stage is split across ranks too) plus the hand-over between
// stages: the rank receives its residual stream [tokens][hidden] (float32, exact) from its
// counterpart (same TP rank) in the previous stage and sends its own to its counterpart in the
// next (backend/rank_placement.h). Step runs one engine step as the stage's part of the pipeline
// (backend/pipeline_schedule.h): the micro-batches in order, then the last stage's TP rank 0
// sends the step's outputs to world rank 0.
//
// Waits are bounded: a message may take as long as the stages before it take to run their
// layers, so each send and receive waits at most 2 x layers + 2 of the communicator's timeouts
// (the collectives assume a layer's work ends within one). A failed send or receive is kept,
// the later ones of the step are skipped, and Step returns it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/rank_placement.h"
#include "dist/communicator.h"
#include "model/forward_ops.h"
#include "model/model_weights.h"
#include "pagellm/status.h"

namespace pagellm {

class PipelineStageOps : public ForwardOps {
 public:
  using ForwardFn = void (*)(const LoadedModel&, const ForwardBatch&, ForwardOps&, ForwardOutput*);

  // `inner` and `world` (the whole tp x pp world) must outlive the ops. min_micro_batch_tokens:
  // PlanMicroBatches'.
  PipelineStageOps(ForwardOps& inner, Communicator& world, const RankPlacement& placement,
                   int min_micro_batch_tokens);

  // One step of `batch` (validated) through `forward` over `model` (this rank's part) with
  // these ops. World rank 0 gets the whole step's outputs in `out` (from the last stage); the
  // other ranks leave it empty. The first failed message of the step, else Ok.
  Status Step(const LoadedModel& model, ForwardFn forward, const ForwardBatch& batch,
              ForwardOutput* out);

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
  void AllReduce(float* x, int64_t n) override { inner_.AllReduce(x, n); }
  void SiluMul(const float* gate, const float* up, float* out, int64_t n) override {
    inner_.SiluMul(gate, up, out, n);
  }
  void MoeFfn(const MoeWeights& w, const MoeConfig& config, const float* h, float* out,
              int64_t rows) override {
    inner_.MoeFfn(w, config, h, out, rows);
  }
  void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) override {
    inner_.GeluTanhMul(gate, up, out, n);
  }
  void Scale(float* x, float s, int64_t n) override { inner_.Scale(x, s, n); }
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
  void ReceiveStageInput(float* x, int64_t n) override;
  void SendStageOutput(const float* x, int64_t n) override;

 private:
  ForwardOps& inner_;
  Communicator& world_;
  const RankPlacement placement_;
  const int min_micro_batch_tokens_;
  int patience_ = 1;  // timeouts per message (set per step from the model's layers)
  Status status_;
  std::vector<uint8_t> message_;  // the last received
  ForwardOutput part_;            // one micro-batch's outputs
};

}  // namespace pagellm
