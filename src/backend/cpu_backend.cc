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

Status CpuBackend::AllocateKvCache(const KvCacheShape& shape, int32_t num_swap_blocks) {
  CHECK(kv_.shape().num_blocks == 0) << "KV cache allocated twice";
  ASSIGN_OR_RETURN(kv_, KvCacheStorage::Create(shape));
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
    if (static_cast<int64_t>(s.block_table.size()) * kv.block_size < end)
      return InvalidArgumentError("block table too short for sequence");
    for (int32_t b : s.block_table)
      if (b <= 0 || b >= kv.num_blocks) return InvalidArgumentError(fmt::format("bad block {}", b));
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
  if (tp_ops_ == nullptr) {
    arch_.forward(model_, batch, ops_, out);
    return Status::Ok();
  }
  arch_.forward(model_, batch, *tp_ops_, out);
  return tp_ops_->TakeStatus();
}

}  // namespace pagellm
