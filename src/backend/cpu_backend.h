// The host backend: the paged KV pools in host memory and the model graph (its ArchSpec's
// forward, model/decoder_graph.h) run on the host kernels through CpuOps (backend/cpu_ops.h).
// As one rank of a tensor-parallel group it runs its shard of the model (model/
// tensor_parallel_shard.h) through TensorParallelOps (backend/tensor_parallel_ops.h); as one
// rank of a pipeline stage, its stage's layers through PipelineStageOps
// (backend/pipeline_stage_ops.h), micro-batch by micro-batch.
#pragma once

#include <memory>
#include <span>

#include "backend/backend.h"
#include "backend/cpu_ops.h"
#include "backend/pipeline_stage_ops.h"
#include "backend/rank_placement.h"
#include "backend/tensor_parallel_ops.h"
#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "dist/communicator.h"
#include "kv/kv_cache_storage.h"
#include "model/arch_spec.h"
#include "model/model_weights.h"

namespace pagellm {

class CpuBackend : public Backend {
 public:
  // `model` and `pool` must outlive the backend (pool may be null). max_positions bounds the
  // RoPE table. Packs the matrices for the kernels of `level`.
  CpuBackend(const LoadedModel& model, ThreadPool* pool, int max_positions, SimdLevel level);
  // One rank of the tensor-parallel `group` (which must outlive the backend): `shard` is this
  // rank's shard of the model whose full config is `full`. Every rank's Forward must run the
  // same batch at the same time (the ops meet in collectives).
  CpuBackend(const LoadedModel& shard, const ModelConfig& full, Communicator* group,
             ThreadPool* pool, int max_positions, SimdLevel level);
  // One rank of a pipeline-parallel `world` (backend/rank_placement.h; must outlive the
  // backend): `part` holds its stage's layers, and its tensor-parallel shard of them when
  // `tp_group` (the stage's ranks) is given. Every rank's Forward must run the same batch at the
  // same time; world rank 0 gets the logits.
  CpuBackend(const LoadedModel& part, const ModelConfig& full, Communicator* tp_group,
             Communicator* world, const RankPlacement& placement, int min_micro_batch_tokens,
             ThreadPool* pool, int max_positions, SimdLevel level);

  Status AllocateKvCache(const KvCacheShape& shape, int32_t num_swap_blocks) override;
  KvCacheStorage& kv_cache() override { return kv_; }
  void CopyKvBlocks(KvPool src, KvPool dst, std::span<const BlockCopy> copies) override;
  void PoisonKvCache() override;
  Status Forward(const ForwardBatch& batch, ForwardOutput* out) override;

  // Bytes of activation scratch a step of `num_tokens` tokens needs (for memory planning).
  static int64_t ActivationBytes(const ModelConfig& config, int64_t num_tokens,
                                 int64_t num_logit_rows);

 private:
  Status ValidateBatch(const ForwardBatch& batch) const;

  const LoadedModel& model_;
  const int32_t vocab_size_;  // the full model's (ids are checked against it)
  const ArchSpec& arch_;      // its graph runs on ops_ (or tp_ops_ around them)
  KvCacheStorage kv_;         // the primary pool
  KvCacheStorage swap_kv_;    // the secondary pool (empty when swapping is off)
  // Sliding window of each KV cache group (0: full attention; every group 0 without groups).
  std::vector<int> group_window_;
  CpuOps ops_;
  std::unique_ptr<TensorParallelOps> tp_ops_;  // set for a rank of a tensor-parallel group
  std::unique_ptr<PipelineStageOps> pp_ops_;   // set for a rank of a pipeline stage
};

}  // namespace pagellm
