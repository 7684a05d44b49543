#include "base/kv_cache_dtype.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "pagellm/check.h"

namespace pagellm {
namespace {

constexpr std::array<std::pair<std::string_view, KvCacheDtype>, 10> kNames = {{
    {"auto", KvCacheDtype::kAuto},
    {"float32", KvCacheDtype::kFloat32},
    {"bfloat16", KvCacheDtype::kBFloat16},
    {"float16", KvCacheDtype::kFloat16},
    {"half", KvCacheDtype::kFloat16},
    {"fp8", KvCacheDtype::kFp8},
    {"fp8_e4m3", KvCacheDtype::kFp8E4m3},
    {"fp8_e5m2", KvCacheDtype::kFp8E5m2},
    {"int8", KvCacheDtype::kInt8},
    {"int4", KvCacheDtype::kInt4},
}};

}  // namespace

StatusOr<KvCacheDtype> ParseKvCacheDtype(std::string_view name) {
  for (const auto& [n, d] : kNames) {
    if (n == name) return d;
  }
  return InvalidArgumentError(fmt::format(
      "--kv-cache-dtype {}: expected one of auto, float32, bfloat16, float16, fp8, fp8_e4m3, "
      "fp8_e5m2, int8, int4",
      name));
}

std::string_view KvCacheDtypeName(KvCacheDtype dtype) {
  for (const auto& [n, d] : kNames) {
    if (d == dtype) return n;  // "float16" precedes its alias "half"
  }
  return "?";
}

StatusOr<KvElementFormat> ResolveKvElementFormat(KvCacheDtype dtype, int auto_bits) {
  if (auto_bits != 32 && auto_bits != 16 && auto_bits != 8) {
    return InvalidArgumentError(
        fmt::format("backend KV cache width {} bits: expected 32, 16 or 8", auto_bits));
  }
  KvElementFormat f;
  f.dtype = dtype;
  switch (dtype) {
    case KvCacheDtype::kAuto:
      f.bits_per_element = auto_bits;
      break;
    case KvCacheDtype::kFloat32:
      f.bits_per_element = 32;
      break;
    case KvCacheDtype::kBFloat16:
    case KvCacheDtype::kFloat16:
      f.bits_per_element = 16;
      break;
    case KvCacheDtype::kFp8:
    case KvCacheDtype::kFp8E4m3:
    case KvCacheDtype::kFp8E5m2:
      f.bits_per_element = 8;
      break;
    case KvCacheDtype::kInt8:
      f.bits_per_element = 8;
      f.scale_bytes_per_head_per_token = kIntKvScaleBytesPerHeadPerToken;
      break;
    case KvCacheDtype::kInt4:
      f.bits_per_element = 4;
      f.scale_bytes_per_head_per_token = kIntKvScaleBytesPerHeadPerToken;
      break;
  }
  return f;
}

KvCacheDtype AutoKvCacheDtype(DType weight_dtype) {
  switch (weight_dtype) {
    case DType::kF32:
      return KvCacheDtype::kFloat32;
    case DType::kBF16:
      return KvCacheDtype::kBFloat16;
    default:
      return KvCacheDtype::kFloat16;
  }
}

StatusOr<KvElementFormat> ResolveKvCacheFormat(KvCacheDtype dtype, DType weight_dtype,
                                               const std::vector<int>& skip_layers,
                                               int num_layers) {
  const KvCacheDtype model = AutoKvCacheDtype(weight_dtype);
  const int model_bits = model == KvCacheDtype::kFloat32 ? 32 : 16;
  ASSIGN_OR_RETURN(KvElementFormat f, ResolveKvElementFormat(dtype, model_bits));
  f.storage_dtype = dtype == KvCacheDtype::kAuto  ? model
                    : dtype == KvCacheDtype::kFp8 ? KvCacheDtype::kFp8E4m3
                                                  : dtype;
  for (int l : skip_layers) {
    if (l < 0 || l >= num_layers) {
      return InvalidArgumentError(
          fmt::format("--kv-cache-dtype-skip-layers: layer {} outside [0, {})", l, num_layers));
    }
    bool seen = false;
    for (int x : f.skip_layers) seen |= x == l;
    if (!seen) f.skip_layers.push_back(l);
  }
  f.skip_dtype = model;
  f.skip_bits_per_element = model_bits;
  return f;
}

int64_t KvBytesPerToken(const KvElementFormat& format, int64_t num_layers, int64_t num_kv_heads,
                        int64_t head_dim) {
  const int64_t skipped = static_cast<int64_t>(format.skip_layers.size());
  int64_t bytes = (num_layers - skipped) * KvBytesPerTokenPerLayer(format, num_kv_heads, head_dim);
  if (skipped > 0) {
    KvElementFormat skip;
    skip.bits_per_element = format.skip_bits_per_element;
    bytes += skipped * KvBytesPerTokenPerLayer(skip, num_kv_heads, head_dim);
  }
  return bytes;
}

int64_t KvBytesPerTokenPerLayer(const KvElementFormat& format, int64_t num_kv_heads,
                                int64_t head_dim) {
  CHECK(format.bits_per_element > 0) << "unresolved KV element format";
  CHECK(head_dim * format.bits_per_element % 8 == 0)
      << "head_dim " << head_dim << " is not a whole number of bytes";
  const int64_t row_bytes = head_dim * format.bits_per_element / 8;
  return 2 * num_kv_heads * (row_bytes + format.scale_bytes_per_head_per_token);
}

}  // namespace pagellm
