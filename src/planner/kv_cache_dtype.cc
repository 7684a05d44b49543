#include "planner/kv_cache_dtype.h"

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

int64_t KvBytesPerTokenPerLayer(const KvElementFormat& format, int64_t num_kv_heads,
                                int64_t head_dim) {
  CHECK(format.bits_per_element > 0) << "unresolved KV element format";
  CHECK(head_dim * format.bits_per_element % 8 == 0)
      << "head_dim " << head_dim << " is not a whole number of bytes";
  const int64_t row_bytes = head_dim * format.bits_per_element / 8;
  return 2 * num_kv_heads * (row_bytes + format.scale_bytes_per_head_per_token);
}

}  // namespace pagellm
