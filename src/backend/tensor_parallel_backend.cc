#include "backend/tensor_parallel_backend.h"

#include <algorithm>
#include <chrono>

#include "backend/tensor_parallel_messages.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace pagellm {
namespace {

// Every rank's result of one step of set-up, gathered on rank 0: there the first failure, naming
// its rank; on the others only a failure to report it (a worker that failed waits for rank 0's
// shut-down message).
Status AgreeOnStatus(Communicator& group, const Status& mine) {
  const std::string text = mine.ok() ? std::string() : mine.ToString();
  std::vector<std::vector<uint8_t>> all;
  RETURN_IF_ERROR(group.GatherToRoot(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()), &all));
  if (group.rank() != 0) {
    if (!mine.ok()) spdlog::error("tensor-parallel rank {}: {}", group.rank(), text);
    return Status::Ok();
  }
  for (int r = 0; r < group.size(); ++r) {
    if (!all[r].empty())
      return FailedPreconditionError(
          fmt::format("tensor-parallel rank {}: {}", r, std::string(all[r].begin(), all[r].end())));
  }
  return Status::Ok();
}

void LogShard(const ShardLayout& l, const LoadedModel& shard);

// A rank's start-up line: under pipeline parallelism its stage and layers, its heads and
// weights; without, LogShard's.
void LogRank(const RankPlacement& p, const LoadedModel& part) {
  if (p.pp == 1) return LogShard(p.shard, part);
  const ShardLayout& l = p.shard;
  spdlog::info(
      "pipeline-parallel rank {}/{}: stage {}/{}, layers [{}, {}){}{}, TP rank {}/{}: query "
      "heads [{}, {}), KV heads [{}, {}); {:.1f} MiB of weights",
      p.world_rank, p.tp * p.pp, p.stage.stage, p.pp, p.stage.layer_begin, p.stage.layer_end,
      p.stage.first() ? ", embedding" : "", p.stage.last() ? ", final norm and lm_head" : "",
      p.tp_rank(), p.tp, l.q_head_begin, l.q_head_begin + l.num_q_heads, l.kv_head_begin,
      l.kv_head_begin + l.num_kv_heads, part.weights.total_bytes / 1048576.0);
}

void LogShard(const ShardLayout& l, const LoadedModel& shard) {
  std::string experts;
  if (l.expert_inter > 0)
    experts = fmt::format(", every expert's columns [{}, {})", l.expert_inter_begin,
                          l.expert_inter_begin + l.expert_inter);
  if (l.shared_inter > 0)
    experts += fmt::format(", shared expert columns [{}, {})", l.shared_inter_begin,
                           l.shared_inter_begin + l.shared_inter);
  spdlog::info(
      "tensor-parallel rank {}/{}: query heads [{}, {}), KV heads [{}, {}), MLP columns [{}, "
      "{}){}, vocabulary [{}, {}); {:.1f} MiB of weights",
      l.rank, l.size, l.q_head_begin, l.q_head_begin + l.num_q_heads, l.kv_head_begin,
      l.kv_head_begin + l.num_kv_heads, l.inter_begin, l.inter_begin + l.inter, experts,
      l.vocab_begin, l.vocab_begin + l.vocab, shard.weights.total_bytes / 1048576.0);
}

// This rank's part of the whole model's KV shape (RankKvShape: its stage's layers, its heads),
// allocated and logged. A quantised format's start-up calibration (engine/kv_calibration.h) is
// computed once on rank 0 over the whole model and each rank keeps its part
// (SetKvCalibration), so every rank stores its layers and heads as one rank would.
Status AllocateRankKv(const KvCacheShape& whole, int32_t num_swap_blocks, const RankPlacement& p,
                      CpuBackend* backend) {
  ASSIGN_OR_RETURN(const KvCacheShape mine, RankKvShape(whole, p));
  RETURN_IF_ERROR(backend->AllocateKvCache(mine, num_swap_blocks));
  if (p.pp > 1)
    spdlog::info("pipeline-parallel rank {}: {} KV blocks of {} layers x {} KV heads ({:.1f} MiB)",
                 p.world_rank, mine.num_blocks, mine.num_layers, mine.num_kv_heads,
                 mine.total_bytes() / 1048576.0);
  return Status::Ok();
}

// The (tensor-parallel) ranks of this rank's pipeline stage: a collective of the whole world,
// made before anything that can fail so that every rank joins it. Null without pipeline
// parallelism (the world is the group).
StatusOr<std::unique_ptr<Communicator>> SplitStages(Communicator& world, int pp) {
  if (pp <= 1) return std::unique_ptr<Communicator>();
  if (world.size() % pp != 0)
    return InvalidArgumentError(
        fmt::format("{} ranks cannot form {} pipeline stages of equal size", world.size(), pp));
  const int tp = world.size() / pp;
  return world.Split(world.rank() / tp, world.rank() % tp);
}

// The local backend of a rank: the tensor-parallel one without pipeline parallelism, else a
// stage's (with its stage group when that has more than one rank).
std::unique_ptr<CpuBackend> MakeRankBackend(const LoadedModel& part, const ModelConfig& full,
                                            Communicator* world, Communicator* stage_group,
                                            const RankPlacement& p, int min_micro_batch_tokens,
                                            ThreadPool* pool, int max_positions, SimdLevel level) {
  if (p.pp == 1) return std::make_unique<CpuBackend>(part, full, world, pool, max_positions, level);
  return std::make_unique<CpuBackend>(part, full, p.tp > 1 ? stage_group : nullptr, world, p,
                                      min_micro_batch_tokens, pool, max_positions, level);
}

// A worker's state between messages.
struct WorkerState {
  std::unique_ptr<LoadedModel> model;
  RankPlacement placement;
  std::unique_ptr<Communicator> stage_group;
  std::unique_ptr<LoadedModel> stage;
  std::unique_ptr<LoadedModel> shard;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<CpuBackend> backend;
};

Status WorkerInit(Communicator& group, const TpInit& m, WorkerState* w) {
  w->backend.reset();
  w->shard.reset();
  w->stage.reset();
  w->model.reset();
  ASSIGN_OR_RETURN(w->model, LoadModel(m.model_path, m.load_options));
  const int pp = std::max(m.pipeline_parallel_size, 1);
  const std::vector<int> partition(m.layer_partition.begin(), m.layer_partition.end());
  ASSIGN_OR_RETURN(w->placement,
                   PlaceRank(w->model->config, group.rank(), group.size() / pp, pp, partition));
  ASSIGN_OR_RETURN(w->shard, RankModel(*w->model, w->placement, &w->stage));
  w->pool = std::make_unique<ThreadPool>(m.threads);
  w->backend = MakeRankBackend(*w->shard, w->model->config, &group, w->stage_group.get(),
                               w->placement, m.min_micro_batch_tokens, w->pool.get(),
                               m.max_positions, static_cast<SimdLevel>(m.simd_level));
  LogRank(w->placement, *w->shard);
  return Status::Ok();
}

Status WorkerAllocate(const TpAllocateKv& m, WorkerState* w) {
  if (w->backend == nullptr) return FailedPreconditionError("KV cache before the model");
  return AllocateRankKv(m.shape, m.num_swap_blocks, w->placement, w->backend.get());
}

Status WorkerKvCalibration(const KvCalibration& cal, WorkerState* w) {
  if (w->backend == nullptr) return FailedPreconditionError("KV calibration before the model");
  return ApplyRankKvCalibration(cal, w->placement, &w->backend->kv_cache());
}

}  // namespace

StatusOr<std::unique_ptr<Backend>> TensorParallelBackend::Create(const LoadedModel& model,
                                                                 Communicator* group,
                                                                 ThreadPool* pool,
                                                                 int max_positions, SimdLevel level,
                                                                 const PipelineOptions& pipeline) {
  CHECK(group != nullptr && group->rank() == 0 && group->size() > 1);
  const int pp = std::max(pipeline.pipeline_parallel_size, 1);
  if (group->size() % pp != 0)
    return InvalidArgumentError(
        fmt::format("{} ranks cannot form {} pipeline stages of equal size", group->size(), pp));
  ASSIGN_OR_RETURN(const std::vector<int> partition,
                   PartitionLayers(model.config.num_layers, pp, pipeline.layer_partition));
  TpInit init;
  init.model_path = model.path;
  init.load_options = model.load_options;
  init.max_positions = max_positions;
  init.threads = pool != nullptr ? pool->num_threads() : 1;
  init.simd_level = static_cast<int32_t>(level);
  init.pipeline_parallel_size = pp;
  init.layer_partition.assign(partition.begin(), partition.end());
  init.min_micro_batch_tokens = pipeline.min_micro_batch_tokens;
  std::vector<uint8_t> message = EncodeInit(init);
  RETURN_IF_ERROR(group->Broadcast(&message, false));
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> stage_group, SplitStages(*group, pp));
  // Rank 0 cuts its part of the model it already holds; the others load theirs meanwhile.
  StatusOr<RankPlacement> placement = PlaceRank(model.config, 0, group->size() / pp, pp, partition);
  std::unique_ptr<LoadedModel> stage;
  StatusOr<std::unique_ptr<LoadedModel>> part =
      placement.ok() ? RankModel(model, *placement, &stage)
                     : StatusOr<std::unique_ptr<LoadedModel>>(placement.status());
  RETURN_IF_ERROR(AgreeOnStatus(*group, part.status()));
  std::unique_ptr<TensorParallelBackend> b(new TensorParallelBackend(group, *placement));
  b->stage_group_ = std::move(stage_group);
  b->stage_ = std::move(stage);
  b->shard_ = std::move(part).value();
  b->local_ = MakeRankBackend(*b->shard_, model.config, group, b->stage_group_.get(), b->placement_,
                              pipeline.min_micro_batch_tokens, pool, max_positions, level);
  LogRank(b->placement_, *b->shard_);
  return std::unique_ptr<Backend>(std::move(b));
}

Status TensorParallelBackend::Send(std::vector<uint8_t> message) {
  return group_->Broadcast(&message, false);
}

Status TensorParallelBackend::SendTimed(std::vector<uint8_t> message) {
  const auto start = std::chrono::steady_clock::now();
  const Status s = Send(std::move(message));
  unreported_comm_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

Status TensorParallelBackend::AllocateKvCache(const KvCacheShape& shape, int32_t num_swap_blocks) {
  RETURN_IF_ERROR(Send(EncodeAllocateKv({shape, num_swap_blocks})));
  RETURN_IF_ERROR(
      AgreeOnStatus(*group_, AllocateRankKv(shape, num_swap_blocks, placement_, local_.get())));
  whole_kv_shape_ = shape;
  const KvCacheShape& mine = local_->kv_shape();
  if (placement_.pp == 1)
    spdlog::info("tensor-parallel: each of {} ranks holds {} KV blocks of {} KV heads ({:.1f} MiB)",
                 group_->size(), mine.num_blocks, mine.num_kv_heads,
                 mine.total_bytes() / 1048576.0);
  return Status::Ok();
}

Status TensorParallelBackend::SetKvCalibration(const KvCalibration& cal) {
  RETURN_IF_ERROR(Send(EncodeKvCalibration(cal)));
  return AgreeOnStatus(*group_, ApplyRankKvCalibration(cal, placement_, &local_->kv_cache()));
}

void TensorParallelBackend::CopyKvBlocks(KvPool src, KvPool dst,
                                         std::span<const BlockCopy> copies) {
  if (copies.empty()) return;
  const Status s = SendTimed(EncodeCopyKv(src, dst, copies));
  CHECK(s.ok()) << s.message();  // the MPI communicator aborts the job first
  local_->CopyKvBlocks(src, dst, copies);
}

void TensorParallelBackend::PoisonKvCache() {
  const Status s = Send(EncodePoison());
  CHECK(s.ok()) << s.message();
  local_->PoisonKvCache();
}

Status TensorParallelBackend::Forward(const ForwardBatch& batch, ForwardOutput* out) {
  RETURN_IF_ERROR(SendTimed(EncodeForward(batch)));
  const Status s = local_->Forward(batch, out);
  // The step's broadcasts (block copies before it, then its own message) count as its time.
  out->comm_seconds += unreported_comm_seconds_;
  unreported_comm_seconds_ = 0;
  return s;
}

Status RunTensorParallelWorker(Communicator& group) {
  CHECK(group.rank() != 0);
  WorkerState w;
  TpForward step;
  ForwardOutput out;
  std::vector<uint8_t> message;
  for (;;) {
    RETURN_IF_ERROR(group.Broadcast(&message, /*wait_forever=*/true));
    if (message.empty()) return Status::Ok();
    ASSIGN_OR_RETURN(TpMessageKind kind, MessageKind(message));
    switch (kind) {
      case TpMessageKind::kInit: {
        ASSIGN_OR_RETURN(TpInit init, DecodeInit(message));
        w.backend.reset();
        w.stage_group.reset();
        ASSIGN_OR_RETURN(w.stage_group, SplitStages(group, init.pipeline_parallel_size));
        RETURN_IF_ERROR(AgreeOnStatus(group, WorkerInit(group, init, &w)));
        break;
      }
      case TpMessageKind::kAllocateKv: {
        ASSIGN_OR_RETURN(TpAllocateKv m, DecodeAllocateKv(message));
        RETURN_IF_ERROR(AgreeOnStatus(group, WorkerAllocate(m, &w)));
        break;
      }
      case TpMessageKind::kKvCalibration: {
        ASSIGN_OR_RETURN(KvCalibration cal, DecodeKvCalibration(message));
        RETURN_IF_ERROR(AgreeOnStatus(group, WorkerKvCalibration(cal, &w)));
        break;
      }
      case TpMessageKind::kCopyKv: {
        ASSIGN_OR_RETURN(TpCopyKv m, DecodeCopyKv(message));
        if (w.backend != nullptr) w.backend->CopyKvBlocks(m.src, m.dst, m.copies);
        break;
      }
      case TpMessageKind::kPoison:
        if (w.backend != nullptr) w.backend->PoisonKvCache();
        break;
      case TpMessageKind::kForward: {
        RETURN_IF_ERROR(DecodeForward(message, &step));
        if (w.backend == nullptr) return FailedPreconditionError("a step before the model");
        const Status s = w.backend->Forward(step.batch, &out);
        // A batch that fails validation fails on rank 0 too (the same checks, no collective
        // was started); a failed collective ends the loop.
        if (!s.ok() && s.code() == StatusCode::kUnavailable) return s;
        break;
      }
    }
  }
}

Status ShutDownTensorParallelWorkers(Communicator& group) {
  std::vector<uint8_t> empty;
  return group.Broadcast(&empty, false);
}

}  // namespace pagellm
