// Tensor parallelism behind the Backend seam. Rank 0 of a group owns the engine (scheduler,
// KV manager, sampling, server) and holds a TensorParallelBackend: each Backend call is
// broadcast to the other ranks as one message (backend/tensor_parallel_messages.h), then rank 0
// runs it on its own shard. The other ranks run RunTensorParallelWorker: receive a message, run
// the same call on their shard, until the empty (shut-down) message. The ranks' forward passes
// meet in the collectives of TensorParallelOps; rank 0 alone gets the logits. The engine never
// knows: CreateBackend (backend/backend_factory.h) returns this backend when given a group.
//
// With pipeline parallelism the group is the world of tp x pp ranks (backend/rank_placement.h):
// each rank runs its stage's layers (and its TP shard of them), the stages hand their residual
// streams on (backend/pipeline_stage_ops.h), and the TP collectives run in each stage's own
// sub-group. The messages are the same, broadcast to the whole world.
#pragma once

#include <memory>
#include <span>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "backend/pipeline_schedule.h"
#include "backend/rank_placement.h"
#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "dist/communicator.h"
#include "model/model_weights.h"
#include "model/tensor_parallel_shard.h"

namespace pagellm {

class TensorParallelBackend : public Backend {
 public:
  // Rank 0 of `group` (size > 1; the other ranks in RunTensorParallelWorker): tells them to load
  // `model`'s files with its load options, takes its own shard of `model` (which must outlive
  // the backend) and returns once every rank holds its shard, or the first rank's error.
  // With pipeline.pipeline_parallel_size > 1 the group is the world of tp x pp ranks.
  static StatusOr<std::unique_ptr<Backend>> Create(const LoadedModel& model, Communicator* group,
                                                   ThreadPool* pool, int max_positions,
                                                   SimdLevel level,
                                                   const PipelineOptions& pipeline = {});

  // `shape` is the whole model's; each rank allocates its stage's layers of its KV heads (the
  // planner's per-device formula, planner/model_footprint.h KvHeadsPerDevice).
  Status AllocateKvCache(const KvCacheShape& shape, int32_t num_swap_blocks) override;
  // Rank 0's pool (its KV heads of stage 0's layers).
  KvCacheStorage& kv_cache() override { return local_->kv_cache(); }
  // The whole model's shape, as AllocateKvCache was given it.
  const KvCacheShape& model_kv_shape() override { return whole_kv_shape_; }
  // Every rank (rank 0 included) keeps the part of `cal` of its KV heads.
  Status SetKvCalibration(const KvCalibration& cal) override;
  void CopyKvBlocks(KvPool src, KvPool dst, std::span<const BlockCopy> copies) override;
  void PoisonKvCache() override;
  // Runs the step on every rank; out's comm_seconds is rank 0's time inside collectives since
  // the last step (the broadcasts of block copies and of this step's message included).
  Status Forward(const ForwardBatch& batch, ForwardOutput* out) override;

 private:
  TensorParallelBackend(Communicator* group, const RankPlacement& placement)
      : group_(group), placement_(placement) {}
  Status Send(std::vector<uint8_t> message);
  // Send, its time counted in the next step's ForwardOutput::comm_seconds.
  Status SendTimed(std::vector<uint8_t> message);

  Communicator* group_;
  RankPlacement placement_;
  std::unique_ptr<Communicator> stage_group_;  // stage 0's TP ranks (pipeline parallelism)
  std::unique_ptr<LoadedModel> stage_;         // the stage model the shard was cut from
  std::unique_ptr<LoadedModel> shard_;
  std::unique_ptr<CpuBackend> local_;
  KvCacheShape whole_kv_shape_;
  // Time in SendTimed() not yet added to a step's ForwardOutput::comm_seconds.
  double unreported_comm_seconds_ = 0;
};

// The loop of ranks 1.. of `group` (the world, under pipeline parallelism): runs rank 0's
// backend calls on this rank's part of the model until rank 0 sends the shut-down message (Ok)
// or a collective fails.
Status RunTensorParallelWorker(Communicator& group);

// Rank 0's end of the loop: the shut-down message (the other ranks return from
// RunTensorParallelWorker).
Status ShutDownTensorParallelWorkers(Communicator& group);

}  // namespace pagellm
