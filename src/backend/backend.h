// The device seam: everything the engine asks of the hardware that runs a model. A backend
// owns the paged KV storage of its model (a primary pool and, for swap preemption, a secondary
// pool), moves blocks between pools, and runs one ragged batch (base/forward_batch.h) per step.
// Callers get one from CreateBackend (backend/backend_factory.h) and never name an
// implementation.
#pragma once

#include <cstdint>
#include <span>

#include "base/forward_batch.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_cache_storage.h"
#include "pagellm/status.h"

namespace pagellm {

// The two KV pools of a backend: kPrimary is the cache Forward reads and writes (block 0 is the
// null block); kSwap is the secondary pool swapped-out blocks wait in (no null block).
enum class KvPool { kPrimary, kSwap };

class Backend {
 public:
  virtual ~Backend() = default;

  // Allocates the primary pool for `shape` (num_blocks including the null block) and, when
  // num_swap_blocks > 0, a secondary pool of that many blocks with the same per-block layout.
  // Must be called once, before Forward. InvalidArgument for a bad shape, ResourceExhausted
  // when the memory cannot be reserved.
  virtual Status AllocateKvCache(const KvCacheShape& shape, int32_t num_swap_blocks) = 0;
  // The primary pool as host-visible storage: its shape, and the per-layer scales and K
  // smoothing that start-up calibration (engine/kv_calibration.h) sets and reads.
  virtual KvCacheStorage& kv_cache() = 0;
  const KvCacheShape& kv_shape() { return kv_cache().shape(); }
  // The shape AllocateKvCache was given: the whole model's (kv_shape() is this process's part
  // of it when the model is split across ranks).
  virtual const KvCacheShape& model_kv_shape() { return kv_cache().shape(); }
  // Sets the start-up calibration (computed over all of the model's KV heads) of the primary
  // pool; a backend whose pool holds only some heads (tensor parallelism) keeps theirs.
  virtual Status SetKvCalibration(const KvCalibration& cal) {
    return ApplyKvCalibration(cal, 0, &kv_cache());
  }

  // Copies whole blocks (every layer, K and V, bytes as stored) from pool `src` to pool `dst`,
  // in order; copy.src indexes `src`, copy.dst indexes `dst`.
  virtual void CopyKvBlocks(KvPool src, KvPool dst, std::span<const BlockCopy> copies) = 0;
  // A step's swap traffic, as the scheduler lists it: swap-outs first (primary -> secondary),
  // then swap-ins (secondary -> primary).
  void SwapKvBlocks(std::span<const BlockCopy> swap_out, std::span<const BlockCopy> swap_in) {
    CopyKvBlocks(KvPool::kPrimary, KvPool::kSwap, swap_out);
    CopyKvBlocks(KvPool::kSwap, KvPool::kPrimary, swap_in);
  }
  // For tests: fills both pools with NaN in every KV format, so that a kernel reading a slot
  // no request wrote shows up in the logits.
  virtual void PoisonKvCache() = 0;

  // Runs the model over `batch` (its block tables index the primary pool) and writes the
  // logits rows it asks for into `out`.
  virtual Status Forward(const ForwardBatch& batch, ForwardOutput* out) = 0;
};

}  // namespace pagellm
