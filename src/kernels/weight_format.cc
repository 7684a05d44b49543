#include "kernels/weight_format.h"

#include <fmt/format.h>

#include <cstring>

#include "base/half.h"
#include "kernels/kquant_packed.h"
#include "kernels/matmul_decode_internal.h"
#include "kernels/matmul_internal.h"
#include "kernels/packed_weights.h"
#include "kernels/quantize.h"
#include "pagellm/check.h"

namespace pagellm {
namespace {

namespace ki = kernels_internal;

// ---- Row conversions with the table's signatures (quantize.h has the typed ones) ----------

void DequantizeF32(const uint8_t* src, float* dst, int64_t n) {
  std::memcpy(dst, src, n * sizeof(float));
}
template <bool kBf16>
void DequantizeHalf(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = kBf16 ? Bf16ToF32(h) : F16ToF32(h);
  }
}
void DequantizeQ8_0(const uint8_t* src, float* dst, int64_t n) {
  DequantizeRowQ8_0(reinterpret_cast<const BlockQ8_0*>(src), dst, n);
}
void DequantizeQ4_0(const uint8_t* src, float* dst, int64_t n) {
  DequantizeRowQ4_0(reinterpret_cast<const BlockQ4_0*>(src), dst, n);
}

void QuantizeF32(const float* x, uint8_t* dst, int64_t n) {
  std::memcpy(dst, x, n * sizeof(float));
}
void QuantizeF16(const float* x, uint8_t* dst, int64_t n) {
  ConvertF32ToF16(x, reinterpret_cast<uint16_t*>(dst), n);
}
void QuantizeBf16(const float* x, uint8_t* dst, int64_t n) {
  ConvertF32ToBf16(x, reinterpret_cast<uint16_t*>(dst), n);
}
void QuantizeQ8_0(const float* x, uint8_t* dst, int64_t n) {
  QuantizeRowQ8_0(x, reinterpret_cast<BlockQ8_0*>(dst), n);
}
void QuantizeQ4_0(const float* x, uint8_t* dst, int64_t n) {
  QuantizeRowQ4_0(x, reinterpret_cast<BlockQ4_0*>(dst), n);
}

// ---- Packed layouts (packed_weights.h) ----------------------------------------------------

template <DType kType>
int64_t QuantPairsBytes(int64_t rows, int64_t cols) {
  const QuantPackedLayout l = GetQuantPackedLayout(kType, rows, cols);
  return l.groups * l.group_bytes;
}
template <bool kShared>
int64_t Q4ZQuadsBytes(int64_t rows, int64_t cols) {
  const Q4ZQuadLayout<kShared> l = GetQ4ZQuadLayout<kShared>(rows, cols);
  return l.groups * l.group_bytes;
}
int64_t F16LanesBytes(int64_t rows, int64_t cols) {
  const F16LaneLayout l = GetF16LaneLayout(rows, cols);
  return l.groups * l.group_bytes;
}

// ---- Matmul plans: each format's block kernel per SIMD level ------------------------------

template <DType kType>
constexpr ki::MatMulKernels kFloatKernels = {{ki::scalar::MatMulFloatBlock<kType>,
                                              ki::avx2::MatMulFloatBlock<kType>,
                                              ki::avx512::MatMulFloatBlock<kType>}};
template <DType kType>
constexpr ki::MatMulKernels kInt8DotKernels = {{ki::scalar::MatMulQuantBlock<kType>,
                                                ki::avx2::MatMulQuantBlock<kType>,
                                                ki::avx512::MatMulQuantBlock<kType>}};

template <DType kType>
constexpr ki::MatMulKernels kQ4ZKernels = {{ki::scalar::MatMulQuantBlock<kType>,
                                            ki::avx2::MatMulQuantBlock<kType>,
                                            ki::avx512::MatMulQ4ZBlock<kType>}};

template <DType kType>
constexpr ki::MatMulKernels kDecodeKernels = {{ki::scalar::MatMulDecodeBlock<kType>,
                                               ki::avx2::MatMulDecodeBlock<kType>,
                                               ki::avx512::MatMulDecodeBlock<kType>}};

// Q4_K, Q5_K, Q6_K, IQ4_XS: the AVX-512 level reads the packed copy (kquant_packed.h).
template <DType kType>
constexpr ki::MatMulKernels kKQuantKernels = {{ki::scalar::MatMulDecodeBlock<kType>,
                                               ki::avx2::MatMulDecodeBlock<kType>,
                                               ki::avx512::MatMulKQuantBlock<kType>}};

template <DType kType>
int64_t KQuantLanesBytes(int64_t rows, int64_t cols) {
  return KQuantPackedBytes(kType, rows, cols);
}

// A row: geometry from the DType's row, the rest filled in by `fill`.
template <typename Fill>
constexpr WeightFormat Row(DType t, Fill fill) {
  WeightFormat f;
  f.name = DTypeName(t);
  f.dtype = t;
  f.block_elems = DTypeBlockElems(t);
  f.block_bytes = DTypeBlockBytes(t);
  fill(f);
  return f;
}

// The GGUF-only types: decoding kernels, elements read with memcpy (any alignment); their
// quantizers write GGUF files (pagellm quantize) and test weights.
template <DType kType>
constexpr WeightFormat DecodeRow(int ggml_type, DequantizeRowFn dequantize,
                                 QuantizeRowFn quantize) {
  return Row(kType, [&](WeightFormat& f) {
    f.ggml_type = ggml_type;
    f.dequantize = dequantize;
    f.quantize = quantize;
    f.matmul = MatMulFamily::kInt8Decode;
    const bool super = DTypeBlockElems(kType) == 256;
    f.act_quant = super ? ActQuant::kQ8Block256 : ActQuant::kQ8Block32;
    f.act_code_offset = super ? 0 : -1;
    f.kernels = &kDecodeKernels<kType>;
    if constexpr (HasKQuantPackedLayout(kType)) {
      f.kernels = &kKQuantKernels<kType>;
      f.packed = PackedLayout::kKQuantLanes;
      f.packed_bytes = KQuantLanesBytes<kType>;
      f.pack = PackKQuantWeights;
    }
    f.bind = BindInPlace;
  });
}

// Indexed by DType. Alignment: fp32 elements 4 bytes; fp16 halves and the fp16 scale that
// starts every Q8_0 / Q4_0 block 2.
constexpr WeightFormat kFormats[] = {
    Row(DType::kF32,
        [](WeightFormat& f) {
          f.ggml_type = 0;
          f.safetensors_dtype = "F32";
          f.align = 4;
          f.dequantize = DequantizeF32;
          f.quantize = QuantizeF32;
          f.matmul = MatMulFamily::kFloat;
          f.kernels = &kFloatKernels<DType::kF32>;
          f.bind = BindInPlace;
        }),
    Row(DType::kF16,
        [](WeightFormat& f) {
          f.ggml_type = 1;
          f.safetensors_dtype = "F16";
          f.align = 2;
          f.dequantize = DequantizeHalf<false>;
          f.quantize = QuantizeF16;
          f.matmul = MatMulFamily::kFloat;
          f.kernels = &kFloatKernels<DType::kF16>;
          f.packed = PackedLayout::kF16Lanes;
          f.packed_bytes = F16LanesBytes;
          f.pack = PackF16Lanes;
          f.bind = BindInPlace;
        }),
    Row(DType::kBF16,
        [](WeightFormat& f) {
          f.ggml_type = 30;
          f.safetensors_dtype = "BF16";
          f.align = 2;
          f.dequantize = DequantizeHalf<true>;
          f.quantize = QuantizeBf16;
          f.matmul = MatMulFamily::kFloat;
          f.kernels = &kFloatKernels<DType::kBF16>;
          f.bind = BindInPlace;
        }),
    Row(DType::kQ8_0,
        [](WeightFormat& f) {
          f.ggml_type = 8;
          f.align = 2;
          f.dequantize = DequantizeQ8_0;
          f.quantize = QuantizeQ8_0;
          f.matmul = MatMulFamily::kInt8Dot;
          f.act_quant = ActQuant::kQ8Block32;
          f.act_code_offset = 128;
          f.kernels = &kInt8DotKernels<DType::kQ8_0>;
          f.packed = PackedLayout::kQuantPairs;
          f.packed_bytes = QuantPairsBytes<DType::kQ8_0>;
          f.pack = PackQuantWeights;
          f.bind = BindInPlace;
        }),
    Row(DType::kQ4_0,
        [](WeightFormat& f) {
          f.ggml_type = 2;
          f.align = 2;
          f.dequantize = DequantizeQ4_0;
          f.quantize = QuantizeQ4_0;
          f.matmul = MatMulFamily::kInt8Dot;
          f.act_quant = ActQuant::kQ8Block32;
          f.act_code_offset = 8;
          f.kernels = &kInt8DotKernels<DType::kQ4_0>;
          f.packed = PackedLayout::kQuantPairs;
          f.packed_bytes = QuantPairsBytes<DType::kQ4_0>;
          f.pack = PackQuantWeights;
          f.bind = BindInPlace;
        }),
    // Auxiliary tensors only (AWQ / GPTQ codes, zero points and group indices,
    // hf_quant_scheme.h): geometry for the readers, no conversions or kernels.
    Row(DType::kI32,
        [](WeightFormat& f) {
          f.safetensors_dtype = "I32";
          f.align = 4;
        }),
    DecodeRow<DType::kQ4_1>(3, DequantizeRowQ4_1, QuantizeRowQ4_1),
    DecodeRow<DType::kQ5_0>(6, DequantizeRowQ5_0, QuantizeRowQ5_0),
    DecodeRow<DType::kQ5_1>(7, DequantizeRowQ5_1, QuantizeRowQ5_1),
    DecodeRow<DType::kQ2_K>(10, DequantizeRowQ2_K, QuantizeRowQ2_K),
    DecodeRow<DType::kQ3_K>(11, DequantizeRowQ3_K, QuantizeRowQ3_K),
    DecodeRow<DType::kQ4_K>(12, DequantizeRowQ4_K, QuantizeRowQ4_K),
    DecodeRow<DType::kQ5_K>(13, DequantizeRowQ5_K, QuantizeRowQ5_K),
    DecodeRow<DType::kQ6_K>(14, DequantizeRowQ6_K, QuantizeRowQ6_K),
    DecodeRow<DType::kIQ4_NL>(20, DequantizeRowIQ4_NL, QuantizeRowIQ4_NL),
    DecodeRow<DType::kIQ4_XS>(23, DequantizeRowIQ4_XS, QuantizeRowIQ4_XS),
    // The exact repack of AWQ / GPTQ 4-bit checkpoints (hf_quant_scheme.h): Q4_0's integer
    // kernels with the zero-point term -z * sum(q) per block; no file type of its own.
    Row(DType::kQ4_Z,
        [](WeightFormat& f) {
          f.dequantize = DequantizeRowQ4_Z;
          f.quantize = QuantizeRowQ4_Z;
          f.matmul = MatMulFamily::kInt8Dot;
          f.act_quant = ActQuant::kQ8Block32;
          f.act_code_offset = 1;
          f.kernels = &kQ4ZKernels<DType::kQ4_Z>;
          f.packed = PackedLayout::kQ4ZQuads;
          f.packed_bytes = Q4ZQuadsBytes<false>;
          f.pack = PackQ4ZWeights;
          f.bind = BindInPlace;
        }),
    // The same for checkpoints whose groups are multiples of 128: one scale and zero point per
    // 128 inputs, applied once per 4 blocks (matmul_internal.h).
    Row(DType::kQ4_Z128,
        [](WeightFormat& f) {
          f.dequantize = DequantizeRowQ4_Z128;
          f.quantize = QuantizeRowQ4_Z128;
          f.matmul = MatMulFamily::kInt8Dot;
          f.act_quant = ActQuant::kQ8Block32;
          f.act_code_offset = 1;
          f.kernels = &kQ4ZKernels<DType::kQ4_Z128>;
          f.packed = PackedLayout::kQ4Z128Quads;
          f.packed_bytes = Q4ZQuadsBytes<true>;
          f.pack = PackQ4ZWeights;
          f.bind = BindInPlace;
        }),
};
static_assert(sizeof(kFormats) / sizeof(kFormats[0]) == kNumDTypes, "one row per DType");

}  // namespace

const WeightFormat& GetWeightFormat(DType t) {
  return kFormats[static_cast<int>(t)];
}

const WeightFormat* FindWeightFormatByGgmlType(uint32_t id) {
  for (const WeightFormat& f : kFormats) {
    if (f.ggml_type >= 0 && static_cast<uint32_t>(f.ggml_type) == id) return &f;
  }
  return nullptr;
}

const WeightFormat* FindWeightFormatBySafetensorsDtype(std::string_view name) {
  for (const WeightFormat& f : kFormats) {
    if (!f.safetensors_dtype.empty() && f.safetensors_dtype == name) return &f;
  }
  return nullptr;
}

StatusOr<WeightMatrix> BindInPlace(const WeightFormat& f, std::span<const WeightTensor> parts,
                                   int64_t rows, int64_t cols, WeightStore*) {
  CHECK_EQ(parts.size(), 1u);
  const WeightTensor& t = parts[0];
  CHECK(t.dtype == f.dtype && t.rows == rows && t.cols == cols) << f.name;
  if (reinterpret_cast<uintptr_t>(t.data) % f.align != 0) {
    return UnimplementedError(fmt::format("data is not {}-byte aligned", f.align));
  }
  WeightMatrix m;
  m.dtype = f.dtype;
  m.rows = rows;
  m.cols = cols;
  m.data = t.data;
  return m;
}

}  // namespace pagellm
