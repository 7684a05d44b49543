// Where one rank of a tensor × pipeline parallel world sits and what it holds. The world's
// tp × pp ranks are laid out stage-major: world rank r is TP rank r % tp of pipeline stage
// r / tp, so world rank 0 (the engine) is TP rank 0 of stage 0, and the ranks of a stage are
// consecutive (one machine's, when a hostfile lists machines in order). A rank holds its stage's
// layers (model/pipeline_stage.h) and, within them, its tensor-parallel shard
// (model/tensor_parallel_shard.h); its KV cache holds those layers and those KV heads.
#pragma once

#include <memory>
#include <vector>

#include "kv/kv_cache_storage.h"
#include "model/model_weights.h"
#include "model/pipeline_stage.h"
#include "model/tensor_parallel_shard.h"
#include "pagellm/status.h"

namespace pagellm {

struct RankPlacement {
  int world_rank = 0;
  int tp = 1, pp = 1;  // tensor-parallel ranks per stage, pipeline stages
  StageLayout stage;   // its layers
  ShardLayout shard;   // its heads, columns and vocabulary rows (rank shard.rank of tp)

  int tp_rank() const { return world_rank % tp; }
  // The world rank of this rank's counterpart (same TP rank) in stage `s`.
  int WorldRankIn(int s) const { return s * tp + tp_rank(); }
};

// World rank `world_rank` of tp × pp ranks, the layers split by `partition` (PartitionLayers).
// InvalidArgument when the model does not split so (ComputeShardLayout's reasons).
StatusOr<RankPlacement> PlaceRank(const ModelConfig& config, int world_rank, int tp, int pp,
                                  const std::vector<int>& partition);

// The model this rank runs: its stage of `full` (the whole model when pp is 1), then its shard
// of that (when tp > 1); tp x pp must be more than 1. `stage_holder` keeps the stage model a
// shard was cut from (it stays empty when the rank runs the stage model itself). Errors are
// ShardModel's.
StatusOr<std::unique_ptr<LoadedModel>> RankModel(const LoadedModel& full, const RankPlacement& p,
                                                 std::unique_ptr<LoadedModel>* stage_holder);

// This rank's part of the whole model's KV cache shape: its stage's layers (skip layers
// renumbered from the stage's first) and its KV heads. InvalidArgument for KV cache groups
// (kv/kv_cache_groups.h) under pipeline parallelism: the engine turns them off there.
StatusOr<KvCacheShape> RankKvShape(const KvCacheShape& whole, const RankPlacement& p);

// Applies this rank's part (its stage's layers, its KV heads) of the whole model's
// calibration to its cache.
Status ApplyRankKvCalibration(const KvCalibration& whole, const RankPlacement& p,
                              KvCacheStorage* kv);

// The weight bytes a rank holds, computed from `full`'s matrices without cutting them (what
// RankModel's total_bytes would be): the planner's and the engine's per-device weights.
int64_t RankWeightBytes(const LoadedModel& full, const RankPlacement& p);

// The largest RankWeightBytes over the tp x pp ranks (the per-device weights of a plan), or
// PlaceRank's error.
StatusOr<int64_t> LargestRankWeightBytes(const LoadedModel& full, int tp, int pp,
                                         const std::vector<int>& partition);

}  // namespace pagellm
