// The host backend: the paged KV pools in host memory and the model graph (its ArchSpec's
// forward, model/decoder_graph.h) run on the host kernels through CpuOps (backend/cpu_ops.h).
#pragma once

#include <span>

#include "backend/backend.h"
#include "backend/cpu_ops.h"
#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "kv/kv_cache_storage.h"
#include "model/arch_spec.h"
#include "model/model_weights.h"

namespace pagellm {

class CpuBackend : public Backend {
 public:
  // `model` and `pool` must outlive the backend (pool may be null). max_positions bounds the
  // RoPE table. Packs the matrices for the kernels of `level`.
  CpuBackend(const LoadedModel& model, ThreadPool* pool, int max_positions, SimdLevel level);

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
  const ArchSpec& arch_;    // its graph runs on ops_
  KvCacheStorage kv_;       // the primary pool
  KvCacheStorage swap_kv_;  // the secondary pool (empty when swapping is off)
  CpuOps ops_;
};

}  // namespace pagellm
