#include "backend/rank_placement.h"

#include <algorithm>

#include "fmt/format.h"
#include "pagellm/check.h"

namespace pagellm {

StatusOr<RankPlacement> PlaceRank(const ModelConfig& config, int world_rank, int tp, int pp,
                                  const std::vector<int>& partition) {
  if (tp < 1 || pp < 1 || world_rank < 0 || world_rank >= tp * pp)
    return InvalidArgumentError(
        fmt::format("rank {} of {} tensor-parallel x {} pipeline ranks", world_rank, tp, pp));
  ASSIGN_OR_RETURN(std::vector<int> layers, PartitionLayers(config.num_layers, pp, partition));
  RankPlacement p;
  p.world_rank = world_rank;
  p.tp = tp;
  p.pp = pp;
  p.stage = StageOf(layers, world_rank / tp);
  ASSIGN_OR_RETURN(p.shard, ComputeShardLayout(config, world_rank % tp, tp));
  return p;
}

StatusOr<std::unique_ptr<LoadedModel>> RankModel(const LoadedModel& full, const RankPlacement& p,
                                                 std::unique_ptr<LoadedModel>* stage_holder) {
  const LoadedModel* stage = &full;
  if (p.pp > 1) {
    *stage_holder = StageModel(full, p.stage);
    stage = stage_holder->get();
  }
  if (p.tp > 1) return ShardModel(*stage, p.shard);
  // A stage of one rank runs the stage model itself.
  CHECK(p.pp > 1) << "a rank of a world of one";
  std::unique_ptr<LoadedModel> own = std::move(*stage_holder);
  return own;
}

StatusOr<KvCacheShape> RankKvShape(const KvCacheShape& whole, const RankPlacement& p) {
  KvCacheShape s = whole;
  s.num_kv_heads = p.shard.num_kv_heads;
  if (p.pp == 1) return s;
  if (!whole.layer_region.empty() || !whole.layer_group.empty())
    return InvalidArgumentError(
        "KV cache groups (sliding-window layers freeing blocks) cannot be split across pipeline "
        "stages");
  s.num_layers = p.stage.num_layers();
  s.skip_layers.clear();
  for (int l : whole.skip_layers)
    if (l >= p.stage.layer_begin && l < p.stage.layer_end)
      s.skip_layers.push_back(l - p.stage.layer_begin);
  return s;
}

Status ApplyRankKvCalibration(const KvCalibration& whole, const RankPlacement& p,
                              KvCacheStorage* kv) {
  if (p.pp == 1) return ApplyKvCalibration(whole, p.shard.kv_head_begin, kv);
  const size_t begin = static_cast<size_t>(p.stage.layer_begin);
  const size_t end = static_cast<size_t>(p.stage.layer_end);
  if (whole.k_offset.size() < end || whole.k_smooth.size() < end || whole.k_scale.size() < end ||
      whole.v_scale.size() < end)
    return InvalidArgumentError(
        fmt::format("KV calibration of {} layers for a stage of layers [{}, {})",
                    whole.k_offset.size(), begin, end));
  KvCalibration mine;
  mine.num_kv_heads = whole.num_kv_heads;
  mine.head_dim = whole.head_dim;
  mine.k_offset.assign(whole.k_offset.begin() + begin, whole.k_offset.begin() + end);
  mine.k_smooth.assign(whole.k_smooth.begin() + begin, whole.k_smooth.begin() + end);
  mine.k_scale.assign(whole.k_scale.begin() + begin, whole.k_scale.begin() + end);
  mine.v_scale.assign(whole.v_scale.begin() + begin, whole.v_scale.begin() + end);
  return ApplyKvCalibration(mine, p.shard.kv_head_begin, kv);
}

namespace {

// Bytes of `rows` rows of `w`'s `cols` columns (a row slice when cols is w.cols, else the
// column copy ShardModel makes).
int64_t SliceBytes(const WeightMatrix& w, int64_t rows, int64_t cols) {
  if (w.data == nullptr) return 0;
  return rows * DTypeRowBytes(w.dtype, cols);
}

}  // namespace

int64_t RankWeightBytes(const LoadedModel& full, const RankPlacement& p) {
  const ModelConfig& c = full.config;
  const ShardLayout& l = p.shard;
  const ModelWeights& fw = full.weights;
  const bool tied = c.tie_word_embeddings;
  int64_t bytes = 0;
  // The tables as StageModel keeps them, in the shard's vocabulary rows.
  const bool embed = p.stage.first() || (p.stage.last() && tied);
  if (embed) bytes += SliceBytes(fw.embed, l.vocab, fw.embed.cols);
  if (p.stage.last() && !tied) bytes += SliceBytes(fw.lm_head, l.vocab, fw.lm_head.cols);
  const int64_t hd = c.head_dim;
  const int64_t qn = l.num_q_heads * hd, kvn = l.num_kv_heads * hd;
  for (int i = p.stage.layer_begin; i < p.stage.layer_end; ++i) {
    const LayerWeights& f = fw.layers[i];
    bytes += SliceBytes(f.wq, qn, f.wq.cols) + SliceBytes(f.wk, kvn, f.wk.cols) +
             SliceBytes(f.wv, kvn, f.wv.cols) + SliceBytes(f.wo, f.wo.rows, qn);
    if (f.w_down.data != nullptr) {
      bytes += SliceBytes(f.w_gate, l.inter, f.w_gate.cols) +
               SliceBytes(f.w_up, l.inter, f.w_up.cols) +
               SliceBytes(f.w_down, f.w_down.rows, l.inter);
    }
    const MoeWeights& m = f.moe;
    if (m.gate.empty()) continue;
    bytes += m.router.nbytes();
    for (size_t e = 0; e < m.gate.size(); ++e)
      bytes += SliceBytes(m.gate[e], l.expert_inter, m.gate[e].cols) +
               SliceBytes(m.up[e], l.expert_inter, m.up[e].cols) +
               SliceBytes(m.down[e], m.down[e].rows, l.expert_inter);
    if (m.shared_expert_gate.empty()) continue;
    bytes += SliceBytes(m.shared_gate, l.shared_inter, m.shared_gate.cols) +
             SliceBytes(m.shared_up, l.shared_inter, m.shared_up.cols) +
             SliceBytes(m.shared_down, m.shared_down.rows, l.shared_inter);
  }
  return bytes;
}

StatusOr<int64_t> LargestRankWeightBytes(const LoadedModel& full, int tp, int pp,
                                         const std::vector<int>& partition) {
  int64_t most = 0;
  for (int r = 0; r < tp * pp; ++r) {
    ASSIGN_OR_RETURN(const RankPlacement p, PlaceRank(full.config, r, tp, pp, partition));
    most = std::max(most, RankWeightBytes(full, p));
  }
  return most;
}

}  // namespace pagellm
