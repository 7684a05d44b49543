// The messages rank 0's TensorParallelBackend broadcasts to the other ranks of its group: one
// per Backend call, so that every rank runs the same calls in the same order (the scheduler
// and block tables are decided once, on rank 0). An empty message means shut down.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/forward_batch.h"
#include "kv/kv_cache_storage.h"
#include "model/model_weights.h"
#include "pagellm/status.h"

namespace pagellm {

enum class TpMessageKind : uint8_t {
  kInit = 1,
  kAllocateKv,
  kCopyKv,
  kPoison,
  kForward,
  kKvCalibration,  // the whole model's KvCalibration; each rank applies its KV heads' part
};

// kInit: what a rank needs to load its shard and run it like rank 0.
struct TpInit {
  std::string model_path;
  LoadOptions load_options;
  int32_t max_positions = 0;
  int32_t threads = 1;     // kernel threads per rank
  int32_t simd_level = 0;  // SimdLevel
  // Pipeline parallelism: the stages (the world is tp x pp ranks), the layers of each as rank 0
  // resolved them (PartitionLayers) and the micro-batch rule (PlanMicroBatches).
  int32_t pipeline_parallel_size = 1;
  std::vector<int32_t> layer_partition;
  int32_t min_micro_batch_tokens = 0;
};

// kAllocateKv: the whole model's shape (each rank keeps its heads) and the swap pool size.
struct TpAllocateKv {
  KvCacheShape shape;
  int32_t num_swap_blocks = 0;
};

struct TpCopyKv {
  KvPool src = KvPool::kPrimary, dst = KvPool::kPrimary;
  std::vector<BlockCopy> copies;
};

// kForward: the batch, with the block tables it points to.
struct TpForward {
  ForwardBatch batch;
  std::vector<std::vector<int32_t>> block_tables;  // batch.seqs[i].block_table views [i]
};

std::vector<uint8_t> EncodeInit(const TpInit& m);
std::vector<uint8_t> EncodeAllocateKv(const TpAllocateKv& m);
std::vector<uint8_t> EncodeCopyKv(KvPool src, KvPool dst, std::span<const BlockCopy> copies);
std::vector<uint8_t> EncodePoison();
std::vector<uint8_t> EncodeForward(const ForwardBatch& batch);
std::vector<uint8_t> EncodeKvCalibration(const KvCalibration& cal);

// The kind of a non-empty message; DataLoss for an unknown one.
StatusOr<TpMessageKind> MessageKind(const std::vector<uint8_t>& bytes);
StatusOr<TpInit> DecodeInit(const std::vector<uint8_t>& bytes);
StatusOr<TpAllocateKv> DecodeAllocateKv(const std::vector<uint8_t>& bytes);
StatusOr<TpCopyKv> DecodeCopyKv(const std::vector<uint8_t>& bytes);
StatusOr<KvCalibration> DecodeKvCalibration(const std::vector<uint8_t>& bytes);
// Fills `out` (its batch's spans point into its block_tables).
Status DecodeForward(const std::vector<uint8_t>& bytes, TpForward* out);

}  // namespace pagellm
