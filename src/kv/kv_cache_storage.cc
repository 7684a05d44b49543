#include "kv/kv_cache_storage.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fmt/format.h"
#include "kernels/kv_quant.h"
#include "pagellm/check.h"

namespace pagellm {

KvCacheDtype KvCacheShape::layer_dtype(int layer) const {
  const bool skip = std::find(skip_layers.begin(), skip_layers.end(), layer) != skip_layers.end();
  return CanonicalKvStorageDtype(skip ? skip_dtype : dtype);
}

int64_t KvCacheShape::row_bytes(int layer) const {
  return KvRowBytes(layer_dtype(layer), head_dim);
}

int KvCacheShape::num_regions() const {
  if (layer_region.empty()) return num_layers;
  return *std::max_element(layer_region.begin(), layer_region.end()) + 1;
}

int KvCacheShape::num_groups() const {
  if (layer_group.empty()) return 1;
  return *std::max_element(layer_group.begin(), layer_group.end()) + 1;
}

int KvCacheShape::region_layer(int r) const {
  if (layer_region.empty()) return r;
  const auto it = std::find(layer_region.begin(), layer_region.end(), r);
  CHECK(it != layer_region.end()) << "KV region " << r << " has no layer";
  return static_cast<int>(it - layer_region.begin());
}

int64_t KvCacheShape::bytes_per_token() const {
  int64_t b = 0;
  for (int r = 0; r < num_regions(); ++r) b += 2 * bytes_per_token_per_layer(region_layer(r));
  return b;
}

std::string KvCacheKeySpace(const KvCacheShape& shape) {
  const KvCacheDtype dtype = CanonicalKvStorageDtype(shape.dtype);
  std::string s(KvCacheDtypeName(dtype));
  if (KvDtypeIsQuantized(dtype)) s += "+kcal";
  if (!shape.skip_layers.empty()) {
    std::vector<int> layers = shape.skip_layers;
    std::sort(layers.begin(), layers.end());
    s += "+skip";
    for (size_t i = 0; i < layers.size(); ++i) s += (i ? "," : "") + std::to_string(layers[i]);
    s += ":" + std::string(KvCacheDtypeName(CanonicalKvStorageDtype(shape.skip_dtype)));
  }
  return s;
}

StatusOr<KvCacheStorage> KvCacheStorage::Create(const KvCacheShape& shape) {
  if (shape.num_layers <= 0 || shape.num_kv_heads <= 0 || shape.head_dim <= 0 ||
      shape.block_size < 1 || shape.block_size > 256 || shape.num_blocks < 2) {
    return InvalidArgumentError(fmt::format(
        "invalid KV cache shape: layers {} kv_heads {} head_dim {} block_size {} blocks {}",
        shape.num_layers, shape.num_kv_heads, shape.head_dim, shape.block_size, shape.num_blocks));
  }
  if (shape.dtype == KvCacheDtype::kAuto || shape.skip_dtype == KvCacheDtype::kAuto)
    return InvalidArgumentError("KV cache dtype 'auto' must be resolved before allocation");
  if (shape.dtype == KvCacheDtype::kInt4 && shape.head_dim % 2 != 0)
    return InvalidArgumentError(
        fmt::format("--kv-cache-dtype int4 needs an even head_dim, got {}", shape.head_dim));
  for (int l : shape.skip_layers)
    if (l < 0 || l >= shape.num_layers)
      return InvalidArgumentError(fmt::format(
          "--kv-cache-dtype-skip-layers: layer {} outside [0, {})", l, shape.num_layers));
  if (!shape.layer_group.empty() &&
      (static_cast<int>(shape.layer_group.size()) != shape.num_layers ||
       *std::min_element(shape.layer_group.begin(), shape.layer_group.end()) < 0))
    return InvalidArgumentError("KV layer groups must name every layer");
  if (!shape.layer_region.empty()) {
    if (static_cast<int>(shape.layer_region.size()) != shape.num_layers)
      return InvalidArgumentError("KV layer regions must name every layer");
    for (int l = 0; l < shape.num_layers; ++l) {
      const int r = shape.layer_region[l];
      if (r < 0 || shape.layer_dtype(l) != shape.layer_dtype(shape.region_layer(r)))
        return InvalidArgumentError(
            fmt::format("KV layer {} shares region {} with a layer of another dtype", l, r));
    }
  }
  KvCacheStorage s;
  s.shape_ = shape;
  int64_t offset = 0;
  std::vector<int64_t> region_offset;  // [2 x region + kv]
  for (int r = 0; r < shape.num_regions(); ++r) {
    for (int kv = 0; kv < 2; ++kv) {
      region_offset.push_back(offset);
      offset += shape.bytes_per_block_per_layer(shape.region_layer(r)) * shape.num_blocks;
    }
  }
  for (int l = 0; l < shape.num_layers; ++l) {
    s.layer_dtype_.push_back(shape.layer_dtype(l));
    s.row_bytes_.push_back(shape.row_bytes(l));
    for (int kv = 0; kv < 2; ++kv)
      s.layer_offset_.push_back(region_offset[2 * shape.region(l) + kv]);
  }
  s.k_scale_.assign(shape.num_layers, 1.0f);
  s.v_scale_.assign(shape.num_layers, 1.0f);
  const size_t smooth = size_t{static_cast<size_t>(shape.num_layers)} * shape.num_kv_heads *
                        static_cast<size_t>(shape.head_dim);
  s.k_offset_.assign(smooth, 0.0f);
  s.k_smooth_.assign(smooth, 1.0f);
  s.k_smoothed_.assign(shape.num_layers, 0);
  const size_t bytes = static_cast<size_t>(shape.total_bytes());
  CHECK_EQ(static_cast<int64_t>(bytes), offset);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return ResourceExhaustedError(
        fmt::format("cannot reserve {} bytes of KV cache: {}", bytes, std::strerror(errno)));
  }
  s.base_ = static_cast<uint8_t*>(p);
  s.mapped_bytes_ = bytes;
  return s;
}

KvCacheStorage::~KvCacheStorage() {
  Release();
}

void KvCacheStorage::Release() {
  if (base_ != nullptr) ::munmap(base_, mapped_bytes_);
  base_ = nullptr;
  mapped_bytes_ = 0;
}

KvCacheStorage::KvCacheStorage(KvCacheStorage&& o) noexcept {
  *this = std::move(o);
}

KvCacheStorage& KvCacheStorage::operator=(KvCacheStorage&& o) noexcept {
  if (this != &o) {
    Release();
    shape_ = std::move(o.shape_);
    layer_dtype_ = std::move(o.layer_dtype_);
    row_bytes_ = std::move(o.row_bytes_);
    layer_offset_ = std::move(o.layer_offset_);
    k_scale_ = std::move(o.k_scale_);
    v_scale_ = std::move(o.v_scale_);
    k_offset_ = std::move(o.k_offset_);
    k_smooth_ = std::move(o.k_smooth_);
    k_smoothed_ = std::move(o.k_smoothed_);
    base_ = o.base_;
    mapped_bytes_ = o.mapped_bytes_;
    o.base_ = nullptr;
    o.mapped_bytes_ = 0;
  }
  return *this;
}

float* KvCacheStorage::k(int layer) {
  CHECK(layer_dtype_[layer] == KvCacheDtype::kFloat32) << "float view of a quantised KV layer";
  return reinterpret_cast<float*>(k_bytes(layer));
}
float* KvCacheStorage::v(int layer) {
  CHECK(layer_dtype_[layer] == KvCacheDtype::kFloat32) << "float view of a quantised KV layer";
  return reinterpret_cast<float*>(v_bytes(layer));
}
const float* KvCacheStorage::k(int layer) const {
  CHECK(layer_dtype_[layer] == KvCacheDtype::kFloat32) << "float view of a quantised KV layer";
  return reinterpret_cast<const float*>(k_bytes(layer));
}
const float* KvCacheStorage::v(int layer) const {
  CHECK(layer_dtype_[layer] == KvCacheDtype::kFloat32) << "float view of a quantised KV layer";
  return reinterpret_cast<const float*>(v_bytes(layer));
}
float* KvCacheStorage::k_row(int layer, int block, int slot, int kv_head) {
  CHECK(layer_dtype_[layer] == KvCacheDtype::kFloat32) << "float view of a quantised KV layer";
  return reinterpret_cast<float*>(k_row_bytes(layer, block, slot, kv_head));
}
float* KvCacheStorage::v_row(int layer, int block, int slot, int kv_head) {
  CHECK(layer_dtype_[layer] == KvCacheDtype::kFloat32) << "float view of a quantised KV layer";
  return reinterpret_cast<float*>(v_row_bytes(layer, block, slot, kv_head));
}

Status ApplyKvCalibration(const KvCalibration& cal, int kv_head_begin, KvCacheStorage* kv) {
  const KvCacheShape& s = kv->shape();
  const size_t layers = static_cast<size_t>(s.num_layers);
  if (cal.head_dim != s.head_dim || kv_head_begin < 0 ||
      kv_head_begin + s.num_kv_heads > cal.num_kv_heads || cal.k_offset.size() != layers ||
      cal.k_smooth.size() != layers || cal.k_scale.size() != layers || cal.v_scale.size() != layers)
    return InvalidArgumentError(fmt::format(
        "KV calibration of {} layers x {} KV heads of {} does not fit KV heads [{}, {}) of a "
        "cache of {} layers x heads of {}",
        cal.k_offset.size(), cal.num_kv_heads, cal.head_dim, kv_head_begin,
        kv_head_begin + s.num_kv_heads, s.num_layers, s.head_dim));
  const int64_t full = int64_t{cal.num_kv_heads} * cal.head_dim;
  const int64_t begin = int64_t{kv_head_begin} * s.head_dim;
  for (int l = 0; l < s.num_layers; ++l) {
    const std::vector<float>& c = cal.k_offset[l];
    const std::vector<float>& sm = cal.k_smooth[l];
    if (!c.empty() || !sm.empty()) {
      if (static_cast<int64_t>(c.size()) != full || static_cast<int64_t>(sm.size()) != full)
        return InvalidArgumentError(fmt::format("KV calibration of layer {}: wrong size", l));
      kv->set_k_smoothing(l, c.data() + begin, sm.data() + begin);
    }
    if (cal.k_scale[l] > 0 && cal.v_scale[l] > 0) kv->set_scales(l, cal.k_scale[l], cal.v_scale[l]);
  }
  return Status::Ok();
}

void KvCacheStorage::set_scales(int layer, float k_scale, float v_scale) {
  CHECK(k_scale > 0 && v_scale > 0) << "KV scales must be positive";
  k_scale_[layer] = k_scale;
  v_scale_[layer] = v_scale;
}

void KvCacheStorage::set_k_smoothing(int layer, const float* c, const float* s) {
  const int64_t n = int64_t{shape_.num_kv_heads} * shape_.head_dim;
  for (int64_t i = 0; i < n; ++i) CHECK(s[i] > 0) << "K smoothing ranges must be positive";
  std::copy_n(c, n, k_offset_.data() + layer * n);
  std::copy_n(s, n, k_smooth_.data() + layer * n);
  k_smoothed_[layer] = 1;
}

void KvCacheStorage::CopyBlockFrom(const KvCacheStorage& src, int src_block, int dst_block) {
  CHECK_EQ(src.shape_.num_layers, shape_.num_layers);
  CHECK_EQ(src.shape_.block_size, shape_.block_size);
  CHECK(src.shape_.layer_region == shape_.layer_region);
  CHECK(src_block >= 0 && src_block < src.shape_.num_blocks);
  CHECK(dst_block >= 0 && dst_block < shape_.num_blocks);
  // One layer per region: the region's bytes are the block's, whichever group owns it.
  for (int r = 0; r < shape_.num_regions(); ++r) {
    const int l = shape_.region_layer(r);
    CHECK(src.layer_dtype_[l] == layer_dtype_[l]);
    const int64_t n = shape_.bytes_per_block_per_layer(l);
    CHECK_EQ(src.shape_.bytes_per_block_per_layer(l), n);
    std::memcpy(k_bytes(l) + dst_block * n, src.k_bytes(l) + src_block * n, n);
    std::memcpy(v_bytes(l) + dst_block * n, src.v_bytes(l) + src_block * n, n);
  }
}

void KvCacheStorage::PoisonWithNaN() {
  if (base_ == nullptr) return;
  std::memset(base_, 0xFF, mapped_bytes_);
}

}  // namespace pagellm
