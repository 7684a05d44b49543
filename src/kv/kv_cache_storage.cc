#include "kv/kv_cache_storage.h"

#include <algorithm>
#include <limits>

#include "pagellm/check.h"
#include <new>

#include "fmt/format.h"

namespace pagellm {

StatusOr<KvCacheStorage> KvCacheStorage::Create(const KvCacheShape& shape) {
  if (shape.num_layers <= 0 || shape.num_kv_heads <= 0 || shape.head_dim <= 0 ||
      shape.block_size < 1 || shape.block_size > 256 || shape.num_blocks < 2) {
    return InvalidArgumentError(fmt::format(
        "invalid KV cache shape: layers {} kv_heads {} head_dim {} block_size {} blocks {}",
        shape.num_layers, shape.num_kv_heads, shape.head_dim, shape.block_size,
        shape.num_blocks));
  }
  KvCacheStorage s;
  s.shape_ = shape;
  const size_t per_layer = static_cast<size_t>(shape.floats_per_block_per_layer()) *
                           static_cast<size_t>(shape.num_blocks);
  try {
    s.k_.resize(shape.num_layers);
    s.v_.resize(shape.num_layers);
    for (int l = 0; l < shape.num_layers; ++l) {
      s.k_[l].assign(per_layer, 0.0f);
      s.v_[l].assign(per_layer, 0.0f);
    }
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError(
        fmt::format("cannot allocate {} bytes of KV cache", shape.total_bytes()));
  }
  return s;
}

void KvCacheStorage::CopyBlockFrom(const KvCacheStorage& src, int src_block, int dst_block) {
  CHECK_EQ(src.shape_.floats_per_block_per_layer(), shape_.floats_per_block_per_layer());
  CHECK_EQ(src.shape_.num_layers, shape_.num_layers);
  CHECK(src_block >= 0 && src_block < src.shape_.num_blocks);
  CHECK(dst_block >= 0 && dst_block < shape_.num_blocks);
  const int64_t n = shape_.floats_per_block_per_layer();
  for (int l = 0; l < shape_.num_layers; ++l) {
    std::copy_n(src.k_[l].data() + src_block * n, n, k_[l].data() + dst_block * n);
    std::copy_n(src.v_[l].data() + src_block * n, n, v_[l].data() + dst_block * n);
  }
}

void KvCacheStorage::PoisonWithNaN() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto& layer : k_) layer.assign(layer.size(), nan);
  for (auto& layer : v_) layer.assign(layer.size(), nan);
}

}  // namespace pagellm
