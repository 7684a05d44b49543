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
#include "model/forwarding_ops.h"
#include "model/model_weights.h"
#include "pagellm/status.h"

namespace pagellm {

class PipelineStageOps : public ForwardingOps {
 public:
  using ForwardFn = void (*)(const LoadedModel&, const ForwardBatch&, ForwardOps&, ForwardOutput*);

  // `inner` and `world` (the whole tp x pp world) must outlive the ops; every op but the
  // stage hand-over goes to `inner`. min_micro_batch_tokens: PlanMicroBatches'.
  PipelineStageOps(ForwardOps& inner, Communicator& world, const RankPlacement& placement,
                   int min_micro_batch_tokens);

  // One step of `batch` (validated) through `forward` over `model` (this rank's part) with
  // these ops. World rank 0 gets the whole step's outputs in `out` (from the last stage); the
  // other ranks leave it empty. The first failed message of the step, else Ok.
  Status Step(const LoadedModel& model, ForwardFn forward, const ForwardBatch& batch,
              ForwardOutput* out);

  void ReceiveStageInput(float* x, int64_t n) override;
  void SendStageOutput(const float* x, int64_t n) override;

 private:
  Communicator& world_;
  const RankPlacement placement_;
  const int min_micro_batch_tokens_;
  int patience_ = 1;  // timeouts per message (set per step from the model's layers)
  Status status_;
  std::vector<uint8_t> message_;  // the last received
  ForwardOutput part_;            // one micro-batch's outputs
};

}  // namespace pagellm
