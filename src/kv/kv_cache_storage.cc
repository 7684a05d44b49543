#include "kv/kv_cache_storage.h"

#include <algorithm>
#include <limits>

#include "pagellm/check.h"
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

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
  const size_t bytes = static_cast<size_t>(shape.total_bytes());
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return ResourceExhaustedError(fmt::format("cannot reserve {} bytes of KV cache: {}", bytes,
                                              std::strerror(errno)));
  }
  s.base_ = static_cast<float*>(p);
  s.mapped_bytes_ = bytes;
  return s;
}

KvCacheStorage::~KvCacheStorage() { Release(); }

void KvCacheStorage::Release() {
  if (base_ != nullptr) ::munmap(base_, mapped_bytes_);
  base_ = nullptr;
  mapped_bytes_ = 0;
}

KvCacheStorage::KvCacheStorage(KvCacheStorage&& o) noexcept
    : shape_(o.shape_), base_(o.base_), mapped_bytes_(o.mapped_bytes_) {
  o.base_ = nullptr;
  o.mapped_bytes_ = 0;
}

KvCacheStorage& KvCacheStorage::operator=(KvCacheStorage&& o) noexcept {
  if (this != &o) {
    Release();
    shape_ = o.shape_;
    base_ = o.base_;
    mapped_bytes_ = o.mapped_bytes_;
    o.base_ = nullptr;
    o.mapped_bytes_ = 0;
  }
  return *this;
}

void KvCacheStorage::CopyBlockFrom(const KvCacheStorage& src, int src_block, int dst_block) {
  CHECK_EQ(src.shape_.floats_per_block_per_layer(), shape_.floats_per_block_per_layer());
  CHECK_EQ(src.shape_.num_layers, shape_.num_layers);
  CHECK(src_block >= 0 && src_block < src.shape_.num_blocks);
  CHECK(dst_block >= 0 && dst_block < shape_.num_blocks);
  const int64_t n = shape_.floats_per_block_per_layer();
  for (int l = 0; l < shape_.num_layers; ++l) {
    std::copy_n(src.k(l) + src_block * n, n, k(l) + dst_block * n);
    std::copy_n(src.v(l) + src_block * n, n, v(l) + dst_block * n);
  }
}

void KvCacheStorage::PoisonWithNaN() {
  if (base_ == nullptr) return;
  std::fill_n(base_, mapped_bytes_ / sizeof(float), std::numeric_limits<float>::quiet_NaN());
}

}  // namespace pagellm
