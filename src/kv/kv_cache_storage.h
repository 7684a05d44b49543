// Paged KV storage: one object holding, per layer, K and V for every block.
//
// Layout per layer and per K/V: [num_blocks][block_size][num_kv_heads][head_dim] float32.
// A token at position p of a request lives in block block_table[p / block_size], slot
// p % block_size. Block 0 is the reserved null block (never written with real data).
#pragma once

#include <cstdint>
#include <vector>

#include "pagellm/status.h"

namespace pagellm {

struct KvCacheShape {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // tokens per block, 1..256
  int num_blocks = 0;   // including the null block 0

  int64_t floats_per_token_per_layer() const { return int64_t{num_kv_heads} * head_dim; }
  int64_t floats_per_block_per_layer() const {
    return floats_per_token_per_layer() * block_size;
  }
  // Bytes of K and V for one token across all layers.
  int64_t bytes_per_token() const {
    return 2 * int64_t{num_layers} * floats_per_token_per_layer() * int64_t{sizeof(float)};
  }
  int64_t bytes_per_block() const { return bytes_per_token() * block_size; }
  int64_t total_bytes() const { return bytes_per_block() * num_blocks; }
};

class KvCacheStorage {
 public:
  // Reserves the whole cache up front as one anonymous mapping: pages are zero and cost no
  // memory until first written, so a large --gpu-memory-utilization budget starts instantly
  // and only the blocks actually used become resident. ResourceExhausted if the address space
  // cannot be reserved.
  static StatusOr<KvCacheStorage> Create(const KvCacheShape& shape);
  KvCacheStorage() = default;
  ~KvCacheStorage();
  KvCacheStorage(KvCacheStorage&& other) noexcept;
  KvCacheStorage& operator=(KvCacheStorage&& other) noexcept;
  KvCacheStorage(const KvCacheStorage&) = delete;
  KvCacheStorage& operator=(const KvCacheStorage&) = delete;

  const KvCacheShape& shape() const { return shape_; }
  float* k(int layer) { return base_ + layer_offset(layer, 0); }
  float* v(int layer) { return base_ + layer_offset(layer, 1); }
  const float* k(int layer) const { return base_ + layer_offset(layer, 0); }
  const float* v(int layer) const { return base_ + layer_offset(layer, 1); }
  // Address of (block, slot) for one layer's K or V: [num_kv_heads][head_dim] floats.
  float* k_slot(int layer, int block, int slot) {
    return k(layer) + (int64_t{block} * shape_.block_size + slot) * shape_.floats_per_token_per_layer();
  }
  float* v_slot(int layer, int block, int slot) {
    return v(layer) + (int64_t{block} * shape_.block_size + slot) * shape_.floats_per_token_per_layer();
  }
  // Copies one block (every layer, K and V) from `src` into block `dst_block` of this storage;
  // both storages must have the same per-block shape. Used for swap-out/swap-in.
  void CopyBlockFrom(const KvCacheStorage& src, int src_block, int dst_block);
  // Fills every value with a quiet NaN: tests use it to prove kernels never read unused slots.
  void PoisonWithNaN();

 private:
  // Layer l's K at [2l], V at [2l + 1], each floats_per_block_per_layer x num_blocks floats.
  int64_t layer_offset(int layer, int kv) const {
    return (2 * int64_t{layer} + kv) * shape_.floats_per_block_per_layer() * shape_.num_blocks;
  }
  void Release();

  KvCacheShape shape_;
  float* base_ = nullptr;
  size_t mapped_bytes_ = 0;
};

}  // namespace pagellm
