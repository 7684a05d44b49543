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
  // Allocates the whole cache up front (zero-filled). ResourceExhausted if it cannot.
  static StatusOr<KvCacheStorage> Create(const KvCacheShape& shape);
  KvCacheStorage() = default;

  const KvCacheShape& shape() const { return shape_; }
  float* k(int layer) { return k_[layer].data(); }
  float* v(int layer) { return v_[layer].data(); }
  const float* k(int layer) const { return k_[layer].data(); }
  const float* v(int layer) const { return v_[layer].data(); }
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
  KvCacheShape shape_;
  std::vector<std::vector<float>> k_, v_;
};

}  // namespace pagellm
