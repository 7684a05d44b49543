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
  // GGUF-only types (ggml's block layouts; src/kernels/quant_blocks.h has the structs).
  kQ4_1,    // 32: fp16 d, m, 16 B nibbles; x = d * q + m                          (20 bytes)
  kQ5_0,    // 32: fp16 d, 4 B high bits, 16 B nibbles; x = d * (q - 16)           (22 bytes)
  kQ5_1,    // 32: fp16 d, m, 4 B high bits, 16 B nibbles; x = d * q + m           (24 bytes)
  kQ2_K,    // 256: 16 x 4+4-bit scale/min, 2-bit q, fp16 d, dmin                 (84 bytes)
  kQ3_K,    // 256: high-bit mask, 2-bit q, 16 x 6-bit scales, fp16 d             (110 bytes)
  kQ4_K,    // 256: fp16 d, dmin, 8 x 6-bit scale/min, 4-bit q                   (144 bytes)
  kQ5_K,    // 256: as Q4_K plus a high-bit plane                                (176 bytes)
  kQ6_K,    // 256: 4-bit low, 2-bit high, 16 x int8 scales, fp16 d               (210 bytes)
  kIQ4_NL,  // 32: fp16 d, 16 B nibbles indexing a fixed 16-value int8 table      (18 bytes)
  kIQ4_XS,  // 256: fp16 d, 8 x 6-bit scales, nibbles into the IQ4_NL table      (136 bytes)
  // pagellm's own: the layout AWQ / GPTQ 4-bit checkpoints are repacked into (never in a file).
  kQ4_Z,  // 32: fp16 d, uint8 zero point z, 16 B nibbles; x = d * (q - z)         (19 bytes)
  // The same for groups of 128 inputs (AWQ's and GPTQ's default): one d and z per 128.
  kQ4_Z128,  // 128: fp16 d, uint8 z, 4 x 16 B nibbles as 4 Q4_0 blocks; d * (q - z) (67 bytes)
};

// Storage geometry of a type: a row is a sequence of blocks of block_elems elements stored in
// block_bytes bytes each (1 element in 2 or 4 bytes for the plain types; 32 in 34 bytes for
// Q8_0; a 256-element super-block such as Q4_K's would be 256 in 144). Indexed by DType; the
// rest of a weight format's traits (file type ids, conversions, kernels) is the kernels' table
// of weight formats (src/kernels/weight_format.h), which reads its geometry from here.
struct DTypeGeometry {
  std::string_view name;
  int64_t block_elems = 1;
  int64_t block_bytes = 0;
};
inline constexpr DTypeGeometry kDTypeGeometry[] = {
    {"F32", 1, 4},         // kF32
    {"F16", 1, 2},         // kF16
    {"BF16", 1, 2},        // kBF16
    {"Q8_0", 32, 34},      // kQ8_0
    {"Q4_0", 32, 18},      // kQ4_0
    {"I32", 1, 4},         // kI32
    {"Q4_1", 32, 20},      // kQ4_1
    {"Q5_0", 32, 22},      // kQ5_0
    {"Q5_1", 32, 24},      // kQ5_1
    {"Q2_K", 256, 84},     // kQ2_K
    {"Q3_K", 256, 110},    // kQ3_K
    {"Q4_K", 256, 144},    // kQ4_K
    {"Q5_K", 256, 176},    // kQ5_K
    {"Q6_K", 256, 210},    // kQ6_K
    {"IQ4_NL", 32, 18},    // kIQ4_NL
    {"IQ4_XS", 256, 136},  // kIQ4_XS
    {"Q4_Z", 32, 19},      // kQ4_Z
    {"Q4_Z128", 128, 67},  // kQ4_Z128
};
inline constexpr int kNumDTypes =
    static_cast<int>(sizeof(kDTypeGeometry) / sizeof(kDTypeGeometry[0]));
static_assert(static_cast<int>(DType::kQ4_Z128) + 1 == kNumDTypes, "one geometry row per DType");

constexpr const DTypeGeometry& GetDTypeGeometry(DType t) {
  return kDTypeGeometry[static_cast<int>(t)];
}
// Elements per storage block (1 for plain types).
constexpr int64_t DTypeBlockElems(DType t) {
  return GetDTypeGeometry(t).block_elems;
}
// Bytes per storage block.
constexpr int64_t DTypeBlockBytes(DType t) {
  return GetDTypeGeometry(t).block_bytes;
}
// Bytes for a row of n elements; n must be a multiple of DTypeBlockElems(t).
constexpr int64_t DTypeRowBytes(DType t, int64_t n) {
  return n / DTypeBlockElems(t) * DTypeBlockBytes(t);
}
// "F32", "F16", "BF16", "Q8_0", "Q4_0", "I32", "Q4_1", ..., "IQ4_XS", "Q4_Z", "Q4_Z128"
constexpr std::string_view DTypeName(DType t) {
  return GetDTypeGeometry(t).name;
}

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

// 4-bit codes with a zero point per block: the exact repack of AWQ / GPTQ int4 checkpoints (one
// scale and zero point per group of inputs, a group being whole blocks). z is unsigned and may
// exceed 15 (GPTQ's v1 convention stores z - 1, so z = 16 occurs). Packed (19 bytes, blocks
// back to back at any alignment): read and write whole blocks with memcpy.
struct __attribute__((packed)) BlockQ4_Z {
  uint16_t d;      // fp16 scale
  uint8_t z;       // zero point
  uint8_t qs[16];  // as Q4_0: element i (i<16) low nibble of qs[i], element i+16 high nibble
};
static_assert(sizeof(BlockQ4_Z) == 19);

// Q4_Z with one scale and zero point per 128 inputs (a group of 128 is 4 blocks of 32 that
// share them): the layout the kernels stream when a checkpoint's groups are multiples of 128.
// Element 32j + i (i < 16) is the low nibble of qs[16j + i], 32j + 16 + i its high nibble.
struct __attribute__((packed)) BlockQ4_Z128 {
  uint16_t d;      // fp16 scale
  uint8_t z;       // zero point, [0, 16]
  uint8_t qs[64];  // 4 sub-blocks of 32 elements, each as Q4_0's 16 bytes
};
static_assert(sizeof(BlockQ4_Z128) == 67);

}  // namespace pagellm
