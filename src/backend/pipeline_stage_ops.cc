#include "backend/pipeline_stage_ops.h"

#include <cstring>

#include "backend/pipeline_schedule.h"
#include "fmt/format.h"

namespace pagellm {

PipelineStageOps::PipelineStageOps(ForwardOps& inner, Communicator& world,
                                   const RankPlacement& placement, int min_micro_batch_tokens)
    : ForwardingOps(inner),
      world_(world),
      placement_(placement),
      min_micro_batch_tokens_(min_micro_batch_tokens) {}

void PipelineStageOps::ReceiveStageInput(float* x, int64_t n) {
  if (!status_.ok()) return;
  const int from = placement_.WorldRankIn(placement_.stage.stage - 1);
  status_ = world_.Recv(from, &message_, patience_);
  if (!status_.ok()) return;
  if (message_.size() != static_cast<size_t>(n) * sizeof(float)) {
    status_ = DataLossError(fmt::format(
        "pipeline-parallel rank {}: stage {} sent {} bytes of hidden states, {} expected",
        placement_.world_rank, placement_.stage.stage - 1, message_.size(), n * sizeof(float)));
    return;
  }
  std::memcpy(x, message_.data(), message_.size());
}

void PipelineStageOps::SendStageOutput(const float* x, int64_t n) {
  if (!status_.ok()) return;
  const int to = placement_.WorldRankIn(placement_.stage.stage + 1);
  status_ = world_.Send(
      to, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(x), n * sizeof(float)),
      patience_);
}

Status PipelineStageOps::Step(const LoadedModel& model, ForwardFn forward,
                              const ForwardBatch& batch, ForwardOutput* out) {
  status_ = Status::Ok();
  patience_ = 2 * model.config.num_layers + 2;
  // The last stage's TP rank 0 holds the logits (gathered over its TP group).
  const bool collects = placement_.stage.last() && placement_.tp_rank() == 0;
  ForwardOutput merged;
  for (const MicroBatch& m : PlanMicroBatches(batch, placement_.pp, min_micro_batch_tokens_)) {
    const ForwardBatch micro = MicroBatchOf(batch, m);
    part_ = ForwardOutput();
    forward(model, micro, *this, &part_);
    if (collects) AppendOutput(part_, &merged);
  }
  *out = ForwardOutput();
  const int last_root = placement_.WorldRankIn(placement_.pp - 1) - placement_.tp_rank();
  if (collects && status_.ok()) {
    if (placement_.world_rank == 0) {
      *out = std::move(merged);
    } else {
      status_ = world_.Send(0, EncodeOutput(merged), patience_);
    }
  } else if (placement_.world_rank == 0 && status_.ok()) {
    status_ = world_.Recv(last_root, &message_, patience_);
    if (status_.ok()) status_ = DecodeOutput(message_, out);
  }
  Status s = std::move(status_);
  status_ = Status::Ok();
  return s;
}

}  // namespace pagellm
