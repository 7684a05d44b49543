// --kv-cache-dtype: the element type of the KV cache and its storage cost per token.
//
// Names follow vLLM's flag (auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2) plus float16, float32 and
// the integer formats of LMDeploy/SGLang (int8, int4). "auto" means "whatever the backend
// stores": the model dtype on a GPU deployment, float32 on the CPU backend today, so its width
// is a parameter of the resolution, never a constant of the formula.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pagellm/dtype.h"
#include "pagellm/status.h"

namespace pagellm {

enum class KvCacheDtype : uint8_t {
  kAuto,
  kFloat32,
  kBFloat16,
  kFloat16,
  kFp8,  // vLLM's "fp8" = fp8_e4m3 on CUDA
  kFp8E4m3,
  kFp8E5m2,
  kInt8,
  kInt4,
};

// Integer KV formats quantise online per token and per KV head, asymmetrically (LMDeploy's
// scheme): every (token, head) row of K and, separately, of V carries an fp16 scale and an fp16
// zero point. That is 2 x 2 = 4 bytes per head per token for K and 4 more for V. fp8 formats use
// one scale per layer (vLLM), which is negligible and counted as 0.
inline constexpr int kIntKvScaleBytesPerHeadPerToken = 4;

// Accepts the names above (case-sensitive, as vLLM) and the alias "half" for float16.
// InvalidArgument naming the flag and the accepted values otherwise.
StatusOr<KvCacheDtype> ParseKvCacheDtype(std::string_view name);
std::string_view KvCacheDtypeName(KvCacheDtype dtype);

// Storage cost of one element and of the per-row quantisation metadata.
struct KvElementFormat {
  KvCacheDtype dtype = KvCacheDtype::kAuto;  // as requested
  int bits_per_element = 0;                  // 32, 16, 8 or 4 after resolving "auto"
  // Bytes added per KV head per token for each of K and V (scale + zero point); 0 for float
  // and fp8 formats.
  int scale_bytes_per_head_per_token = 0;
  // The storage format (fp8 -> fp8_e4m3, auto -> the model dtype) when resolved with
  // ResolveKvCacheFormat; kAuto from ResolveKvElementFormat (width only).
  KvCacheDtype storage_dtype = KvCacheDtype::kAuto;
  // --kv-cache-dtype-skip-layers: these layers are stored in skip_dtype (the model dtype,
  // skip_bits_per_element wide, no scales).
  std::vector<int> skip_layers;
  KvCacheDtype skip_dtype = KvCacheDtype::kAuto;
  int skip_bits_per_element = 0;
};

// What "auto" stores on the CPU backend for a model whose matrices are `weight_dtype`: float32
// for F32, bfloat16 for BF16, float16 otherwise (F16 and quantised GGUF weights; llama.cpp's
// default cache type is f16).
KvCacheDtype AutoKvCacheDtype(DType weight_dtype);

// Resolves a requested dtype for a model (auto and fp8 mapped to what is stored) with its skip
// layers (validated against num_layers: InvalidArgument naming the flag).
StatusOr<KvElementFormat> ResolveKvCacheFormat(KvCacheDtype dtype, DType weight_dtype,
                                               const std::vector<int>& skip_layers, int num_layers);

// Resolves `dtype` with `auto_bits` (the backend's own cache width: 32 on the CPU backend, 16
// for a bf16/fp16 model on a GPU). auto_bits must be 32, 16 or 8.
StatusOr<KvElementFormat> ResolveKvElementFormat(KvCacheDtype dtype, int auto_bits);

// Bytes of K plus V for one token in one layer for `num_kv_heads` heads of `head_dim`
// elements: 2 x heads x (head_dim x bits / 8 + scale bytes). head_dim is even, so int4 rows are
// whole bytes.
int64_t KvBytesPerTokenPerLayer(const KvElementFormat& format, int64_t num_kv_heads,
                                int64_t head_dim);

// Bytes of K plus V for one token over all `num_layers` layers, skip layers at their own width.
int64_t KvBytesPerToken(const KvElementFormat& format, int64_t num_layers, int64_t num_kv_heads,
                        int64_t head_dim);

}  // namespace pagellm
