#include "backend/cpu_backend.h"

#include "fmt/format.h"
#include "model/arch_spec.h"
#include "pagellm/check.h"

namespace pagellm {

CpuBackend::CpuBackend(const LoadedModel& model, ThreadPool* pool, int max_positions,
                       SimdLevel level)
    : model_(model),
      vocab_size_(model.config.vocab_size),
      arch_(GetArchSpec(model.config.arch)),
      ops_(model, pool, max_positions, level) {}

CpuBackend::CpuBackend(const LoadedModel& shard, const ModelConfig& full, Communicator* group,
                       ThreadPool* pool, int max_positions, SimdLevel level)
    : model_(shard),
      vocab_size_(full.vocab_size),
      arch_(GetArchSpec(shard.config.arch)),
      ops_(shard, pool, max_positions, level),
      tp_ops_(std::make_unique<TensorParallelOps>(ops_, *group, full)) {}

CpuBackend::CpuBackend(const LoadedModel& part, const ModelConfig& full, Communicator* tp_group,
                       Communicator* world, const RankPlacement& placement,
                       int min_micro_batch_tokens, ThreadPool* pool, int max_positions,
                       SimdLevel level)
    : model_(part),
      vocab_size_(full.vocab_size),
      arch_(GetArchSpec(part.config.arch)),
      ops_(part, pool, max_positions, level) {
  if (tp_group != nullptr) tp_ops_ = std::make_unique<TensorParallelOps>(ops_, *tp_group, full);
  ForwardOps& inner = tp_ops_ != nullptr ? static_cast<ForwardOps&>(*tp_ops_) : ops_;
  pp_ops_ = std::make_unique<PipelineStageOps>(inner, *world, placement, min_micro_batch_tokens);
}

Status CpuBackend::AllocateKvCache(const KvCacheShape& shape, int32_t num_swap_blocks) {
  CHECK(kv_.shape().num_blocks == 0) << "KV cache allocated twice";
  ASSIGN_OR_RETURN(kv_, KvCacheStorage::Create(shape));
  // A group's layers share one window (kv/kv_cache_groups.h). Without groups the one table
  // covers every position (the window layers mask what they do not see).
  group_window_.assign(shape.num_groups(), shape.layer_group.empty() ? 0 : -1);
  for (int l = 0; l < shape.num_layers && !shape.layer_group.empty(); ++l) {
    int& w = group_window_[shape.group(l)];
    const int window = model_.config.LayerWindow(model_.weights.layer_begin + l);
    if (w >= 0 && w != window)
      return InvalidArgumentError(fmt::format("KV cache group {} mixes windows", shape.group(l)));
    w = window;
  }
  if (num_swap_blocks > 0) {
    KvCacheShape swap = shape;
    swap.num_blocks = num_swap_blocks;
    ASSIGN_OR_RETURN(swap_kv_, KvCacheStorage::Create(swap));
  }
  ops_.BindKvCache(&kv_);
  return Status::Ok();
}

void CpuBackend::CopyKvBlocks(KvPool src, KvPool dst, std::span<const BlockCopy> copies) {
  const KvCacheStorage& from = src == KvPool::kPrimary ? kv_ : swap_kv_;
  KvCacheStorage& to = dst == KvPool::kPrimary ? kv_ : swap_kv_;
  for (const BlockCopy& c : copies) to.CopyBlockFrom(from, c.src, c.dst);
}

void CpuBackend::PoisonKvCache() {
  kv_.PoisonWithNaN();
  swap_kv_.PoisonWithNaN();
}

int64_t CpuBackend::ActivationBytes(const ModelConfig& c, int64_t t, int64_t rows) {
  return GetArchSpec(c.arch).activation_floats(c, t, rows) * static_cast<int64_t>(sizeof(float));
}

Status CpuBackend::ValidateBatch(const ForwardBatch& batch) const {
  CHECK(kv_.shape().num_blocks > 0) << "Forward before AllocateKvCache";
  int64_t total = 0;
  const KvCacheShape& kv = kv_.shape();
  const int max_positions = ops_.rope().max_positions();
  for (const SequenceChunk& s : batch.seqs) {
    if (s.num_tokens < 1 || s.start_pos < 0) return InvalidArgumentError("empty sequence chunk");
    const int64_t end = int64_t{s.start_pos} + s.num_tokens;
    if (end > max_positions)
      return OutOfRangeError(fmt::format("position {} beyond max {}", end, max_positions));
    if (!s.group_block_tables.empty() &&
        static_cast<int>(s.group_block_tables.size()) != kv.num_groups())
      return InvalidArgumentError("one block table per KV cache group expected");
    for (int g = 0; g < kv.num_groups(); ++g) {
      const std::span<const int32_t> table =
          s.group_block_tables.empty() ? s.block_table
                                       : std::span<const int32_t>(s.group_block_tables[g]);
      if (g > 0 && s.group_block_tables.empty())
        return InvalidArgumentError("a block table per KV cache group expected");
      if (static_cast<int64_t>(table.size()) * kv.block_size < end)
        return InvalidArgumentError("block table too short for sequence");
      // A window group may have the null block where no token of the chunk can look.
      const int window = group_window_[g];
      const int64_t first_visible =
          window > 0 ? std::max<int64_t>(0, s.start_pos - window + 1) / kv.block_size : 0;
      for (size_t i = 0; i < table.size(); ++i) {
        const int32_t b = table[i];
        if (b < 0 || b >= kv.num_blocks || (b == 0 && static_cast<int64_t>(i) >= first_visible))
          return InvalidArgumentError(fmt::format("bad block {}", b));
      }
    }
    total += s.num_tokens;
  }
  if (total != static_cast<int64_t>(batch.token_ids.size()))
    return InvalidArgumentError("token count does not match sequence chunks");
  for (int32_t id : batch.token_ids)
    if (id < 0 || id >= vocab_size_)
      return InvalidArgumentError(fmt::format("token id {} outside vocabulary", id));
  return Status::Ok();
}

Status CpuBackend::Forward(const ForwardBatch& batch, ForwardOutput* out) {
  RETURN_IF_ERROR(ValidateBatch(batch));
  if (pp_ops_ != nullptr) {
    const Status s = pp_ops_->Step(model_, arch_.forward, batch, out);
    if (tp_ops_ == nullptr) return s;
    // This stage's collectives (the wait for later stages' logits is their compute, not
    // communication).
    tp_ops_->TakeCommTiming(out);
    RETURN_IF_ERROR(tp_ops_->TakeStatus());
    return s;
  }
  if (tp_ops_ == nullptr) {
    arch_.forward(model_, batch, ops_, out);
    return Status::Ok();
  }
  arch_.forward(model_, batch, *tp_ops_, out);
  tp_ops_->TakeCommTiming(out);
  return tp_ops_->TakeStatus();
}

}  // namespace pagellm
