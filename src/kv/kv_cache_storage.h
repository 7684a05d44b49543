// Paged KV storage: one object holding, per layer, K and V for every block.
//
// Layout per layer and per K/V: [num_blocks][num_kv_heads][block_size] rows, one row being
// KvRowBytes(dtype, head_dim) bytes (kv/kv_quant.h: values, then the scale/zero of integer
// formats, so each block carries its own quantisation metadata). Head-major inside a block:
// attention reads one KV head's rows position after position, and this way the rows of a head
// in a block are one contiguous run (2 KiB for 16 fp16 rows of 64) instead of rows num_kv_heads
// x row_bytes apart, which mapped every row of a head to the same few L1 sets and starved the
// hardware prefetchers (decode attention at depth 4096 took twice as long). A token at position p
// of a request lives in block block_table[p / block_size], slot p % block_size. Block 0 is the
// reserved null block (never written with real data). Layers listed in skip_layers are stored
// in skip_dtype (the model's own width) instead of dtype.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/kv_cache_dtype.h"
#include "pagellm/status.h"

namespace pagellm {

struct KvCacheShape {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // tokens per block, 1..256
  int num_blocks = 0;   // including the null block 0
  // Element format (resolved: never kAuto; kFp8 means e4m3). float32 keeps the historic layout.
  KvCacheDtype dtype = KvCacheDtype::kFloat32;
  // Layers kept at skip_dtype (--kv-cache-dtype-skip-layers).
  std::vector<int> skip_layers;
  KvCacheDtype skip_dtype = KvCacheDtype::kFloat32;
  // Storage region of each layer ([num_layers]; empty: region = layer). Layers of different KV
  // cache groups share a region (kv/kv_cache_groups.h): a block belongs to one group at a time,
  // so region r of block b holds layer groups[g].layers[r] of whichever group g owns b. Layers
  // sharing a region must have the same dtype. Regions are 0..num_regions() - 1.
  std::vector<int> layer_region;
  // KV cache group of each layer ([num_layers]; empty: all 0): the block table the layer's KV
  // is read and written through (SequenceChunk::group_block_tables).
  std::vector<int> layer_group;

  int num_regions() const;
  int region(int layer) const { return layer_region.empty() ? layer : layer_region[layer]; }
  int group(int layer) const { return layer_group.empty() ? 0 : layer_group[layer]; }
  int num_groups() const;
  // A layer stored in `region` (its row size and dtype stand for the region's).
  int region_layer(int region) const;

  KvCacheDtype layer_dtype(int layer) const;
  // Bytes of one (token, KV head) row in `layer`.
  int64_t row_bytes(int layer) const;
  int64_t bytes_per_token_per_layer(int layer) const {  // one of K or V
    return int64_t{num_kv_heads} * row_bytes(layer);
  }
  int64_t bytes_per_block_per_layer(int layer) const {
    return bytes_per_token_per_layer(layer) * block_size;
  }
  // Bytes of K and V for one token of one block across all regions (= all layers without
  // groups): one pool block holds bytes_per_block().
  int64_t bytes_per_token() const;
  int64_t bytes_per_block() const { return bytes_per_token() * block_size; }
  int64_t total_bytes() const { return bytes_per_block() * num_blocks; }
};

// Names the stored format for the prefix-cache key space ("float32", "int8+kcal",
// "int4+kcal+skip0,5:float32"): blocks written in one format are never reused in another.
// Quantised formats carry "+kcal": their K is stored smoothed with the start-up calibration
// (deterministic per model and dtype).
std::string KvCacheKeySpace(const KvCacheShape& shape);

// The start-up calibration of a quantised cache (engine/kv_calibration.h) over all of the
// model's KV heads, kept apart from any storage so that each rank of a tensor-parallel group can
// apply its heads' part of the same numbers (computed once, over the whole model).
struct KvCalibration {
  int num_kv_heads = 0;  // of the whole model
  int head_dim = 0;
  // Per layer: K smoothing c and s ([num_kv_heads][head_dim] each); empty: not smoothed.
  std::vector<std::vector<float>> k_offset, k_smooth;
  // Per layer: fp8_e4m3 scales; 0: left as they are.
  std::vector<float> k_scale, v_scale;
};

class KvCacheStorage;

// Applies KV heads [kv_head_begin, kv_head_begin + kv->shape().num_kv_heads) of `cal` to `kv`
// (the whole of it: kv_head_begin 0 and the same head count). InvalidArgument when those heads
// or the layers do not fit.
Status ApplyKvCalibration(const KvCalibration& cal, int kv_head_begin, KvCacheStorage* kv);

class KvCacheStorage {
 public:
  // Reserves the whole cache up front as one anonymous mapping: pages are zero and cost no
  // memory until first written, so a large --gpu-memory-utilization budget starts instantly
  // and only the blocks actually used become resident. ResourceExhausted if the address space
  // cannot be reserved; InvalidArgument for a bad shape or a dtype the storage cannot hold.
  static StatusOr<KvCacheStorage> Create(const KvCacheShape& shape);
  KvCacheStorage() = default;
  ~KvCacheStorage();
  KvCacheStorage(KvCacheStorage&& other) noexcept;
  KvCacheStorage& operator=(KvCacheStorage&& other) noexcept;
  KvCacheStorage(const KvCacheStorage&) = delete;
  KvCacheStorage& operator=(const KvCacheStorage&) = delete;

  const KvCacheShape& shape() const { return shape_; }
  KvCacheDtype layer_dtype(int layer) const { return layer_dtype_[layer]; }
  int64_t row_bytes(int layer) const { return row_bytes_[layer]; }
  // Raw bytes of one layer's K or V: [num_blocks][num_kv_heads][block_size][row_bytes].
  uint8_t* k_bytes(int layer) { return base_ + layer_offset_[2 * layer]; }
  uint8_t* v_bytes(int layer) { return base_ + layer_offset_[2 * layer + 1]; }
  const uint8_t* k_bytes(int layer) const { return base_ + layer_offset_[2 * layer]; }
  const uint8_t* v_bytes(int layer) const { return base_ + layer_offset_[2 * layer + 1]; }
  // Address of the row of (block, slot, kv_head) in one layer's K or V.
  uint8_t* k_row_bytes(int layer, int block, int slot, int kv_head) {
    return k_bytes(layer) + row_offset(layer, block, slot, kv_head);
  }
  uint8_t* v_row_bytes(int layer, int block, int slot, int kv_head) {
    return v_bytes(layer) + row_offset(layer, block, slot, kv_head);
  }
  // float32 views, valid only for layers stored as float32 (CHECKed).
  float* k(int layer);
  float* v(int layer);
  const float* k(int layer) const;
  const float* v(int layer) const;
  float* k_row(int layer, int block, int slot, int kv_head);
  float* v_row(int layer, int block, int slot, int kv_head);

  // fp8_e4m3 per-layer scales (stored value x scale = real value); 1.0 until set. Other
  // formats ignore them.
  float k_scale(int layer) const { return k_scale_[layer]; }
  float v_scale(int layer) const { return v_scale_[layer]; }
  void set_scales(int layer, float k_scale, float v_scale);

  // K smoothing (calibrated at engine start-up, engine/kv_calibration.h): quantised layers
  // store K' = (K - c) / s per (kv head, channel) instead of K, with c and s
  // [num_kv_heads][head_dim] floats. Attention multiplies q by s and ignores c: q.(s*K' + c)
  // = (s*q).K' + q.c, and q.c is the same for every position a query sees, so softmax drops
  // it. Uncalibrated: c = 0, s = 1, and k_smooth() is null (kernels skip the multiply).
  const float* k_offset(int layer) const {
    return k_offset_.data() + int64_t{layer} * shape_.num_kv_heads * shape_.head_dim;
  }
  const float* k_smooth(int layer) const {
    return k_smoothed_[layer]
               ? k_smooth_.data() + int64_t{layer} * shape_.num_kv_heads * shape_.head_dim
               : nullptr;
  }
  bool k_smoothed(int layer) const { return k_smoothed_[layer] != 0; }
  // c and s: [num_kv_heads][head_dim] each; s must be positive.
  void set_k_smoothing(int layer, const float* c, const float* s);

  // Copies one block (every layer, K and V) from `src` into block `dst_block` of this storage;
  // both storages must have the same per-block layout. Used for swap-out/swap-in (the bytes
  // move as stored: quantised blocks are never re-quantised).
  void CopyBlockFrom(const KvCacheStorage& src, int src_block, int dst_block);
  // Fills every byte with 0xFF: NaN in every format (float, bf16, fp16, both fp8 and the fp16
  // scales of int8/int4), so tests can prove kernels never read unused slots.
  void PoisonWithNaN();

 private:
  int64_t row_offset(int layer, int block, int slot, int kv_head) const {
    return ((int64_t{block} * shape_.num_kv_heads + kv_head) * shape_.block_size + slot) *
           row_bytes_[layer];
  }
  void Release();

  KvCacheShape shape_;
  std::vector<KvCacheDtype> layer_dtype_;   // per layer, canonical
  std::vector<int64_t> row_bytes_;          // per layer
  std::vector<int64_t> layer_offset_;       // [2 x layer + kv] -> byte offset of that region
  std::vector<float> k_scale_, v_scale_;    // per layer (fp8_e4m3)
  std::vector<float> k_offset_, k_smooth_;  // [layer][kv_head][head_dim]: c and s
  std::vector<uint8_t> k_smoothed_;         // per layer: set_k_smoothing was called
  uint8_t* base_ = nullptr;
  size_t mapped_bytes_ = 0;
};

}  // namespace pagellm
