// Element types of weights and KV cache, and their storage geometry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pagellm {

// Values match neither GGUF nor safetensors ids; each reader maps its own ids.
enum class DType : uint8_t {
  kF32 = 0,
  kF16,
  kBF16,
  kQ8_0,  // blocks of 32: fp16 scale d, then 32 x int8 q; x = d * q            (34 bytes)
  kQ4_0,  // blocks of 32: fp16 scale d, then 16 bytes of nibbles; x = d * (q-8) (18 bytes)
  kI32,   // only for auxiliary tensors, never for matmul weights
};

// Elements per storage block (1 for plain types).
constexpr int64_t DTypeBlockElems(DType t) {
  return (t == DType::kQ8_0 || t == DType::kQ4_0) ? 32 : 1;
}
// Bytes per storage block.
constexpr int64_t DTypeBlockBytes(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF16:
      return 2;
    case DType::kBF16:
      return 2;
    case DType::kQ8_0:
      return 34;
    case DType::kQ4_0:
      return 18;
    case DType::kI32:
      return 4;
  }
  return 0;
}
// Bytes for a row of n elements; n must be a multiple of DTypeBlockElems(t).
constexpr int64_t DTypeRowBytes(DType t, int64_t n) {
  return n / DTypeBlockElems(t) * DTypeBlockBytes(t);
}
std::string_view DTypeName(DType t);  // "F32", "F16", "BF16", "Q8_0", "Q4_0", "I32"

struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;      // fp16 scale
  uint8_t qs[16];  // element i (i<16) in low nibble of qs[i], element i+16 in high nibble
};
static_assert(sizeof(BlockQ4_0) == 18);

}  // namespace pagellm
