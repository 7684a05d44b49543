// Row conversions between fp32 and the storage types: quantization (ggml-compatible rounding),
// dequantization (e.g. embedding lookup) and fp16 / bf16 conversion.
#pragma once

#include <cstdint>

#include "pagellm/dtype.h"

namespace pagellm {

// n % 32 == 0. Same rounding as ggml's reference quantizers:
//   Q8_0: d = amax / 127, q = roundf(x * (1/d)) (0 when d == 0); d stored as fp16.
//   Q4_0: m = the element of largest |x| (first on ties), d = m / -8,
//         q = min(15, (int8)(x * (1/d) + 8.5)); d stored as fp16.
void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n);
void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, int64_t n);
// n % 32 == 0; x = d * q (Q8_0), x = d * (q - 8) (Q4_0), exact in fp32.
void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, int64_t n);
void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, int64_t n);
// Q4_Z (n % 32 == 0): x = d * (q - z), exact in fp32. Its quantizer (asymmetric round to
// nearest per block over [min(x, 0), max(x, 0)]: d = (max - min) / 15 as fp16,
// z = roundf(-min / d), q = clamp(roundf(x / d) + z, 0, 15)) makes test weights; the model's Q4_Z
// matrices come from AWQ / GPTQ checkpoints (kernels/hf_quant_scheme.h).
void QuantizeRowQ4_Z(const float* x, uint8_t* y, int64_t n);
void DequantizeRowQ4_Z(const uint8_t* x, float* y, int64_t n);
// Q4_Z128 (n % 128 == 0): the same with one d and z per 128 elements (dtype.h, BlockQ4_Z128).
void QuantizeRowQ4_Z128(const float* x, uint8_t* y, int64_t n);
void DequantizeRowQ4_Z128(const uint8_t* x, float* y, int64_t n);
// Reference dequantizers of the GGUF-only types (dequantize_blocks.cc): n elements of a row of
// whole blocks (32 for Q4_1 / Q5_0 / Q5_1 / IQ4_NL, 256 for the K-quants and IQ4_XS), values
// bitwise equal to ggml's.
void DequantizeRowQ4_1(const uint8_t* x, float* y, int64_t n);
void DequantizeRowQ5_0(const uint8_t* x, float* y, int64_t n);
void DequantizeRowQ5_1(const uint8_t* x, float* y, int64_t n);
void DequantizeRowIQ4_NL(const uint8_t* x, float* y, int64_t n);
void DequantizeRowQ2_K(const uint8_t* x, float* y, int64_t n);
void DequantizeRowQ3_K(const uint8_t* x, float* y, int64_t n);
void DequantizeRowQ4_K(const uint8_t* x, float* y, int64_t n);
void DequantizeRowQ5_K(const uint8_t* x, float* y, int64_t n);
void DequantizeRowQ6_K(const uint8_t* x, float* y, int64_t n);
void DequantizeRowIQ4_XS(const uint8_t* x, float* y, int64_t n);
// Their quantizers (quantize_blocks.cc): n elements (whole blocks) into DTypeRowBytes(t, n)
// bytes; parameters found by a least-squares search per block and sub-block, codes re-rounded
// against the scales as stored (see the file's header).
void QuantizeRowQ4_1(const float* x, uint8_t* y, int64_t n);
void QuantizeRowQ5_0(const float* x, uint8_t* y, int64_t n);
void QuantizeRowQ5_1(const float* x, uint8_t* y, int64_t n);
void QuantizeRowIQ4_NL(const float* x, uint8_t* y, int64_t n);
void QuantizeRowQ2_K(const float* x, uint8_t* y, int64_t n);
void QuantizeRowQ3_K(const float* x, uint8_t* y, int64_t n);
void QuantizeRowQ4_K(const float* x, uint8_t* y, int64_t n);
void QuantizeRowQ5_K(const float* x, uint8_t* y, int64_t n);
void QuantizeRowQ6_K(const float* x, uint8_t* y, int64_t n);
void QuantizeRowIQ4_XS(const float* x, uint8_t* y, int64_t n);

// Writes DTypeRowBytes(t, n) bytes of row storage for any type with a quantizer in the weight
// format table (kernels/weight_format.h: every matmul format).
void QuantizeRow(DType t, const float* x, uint8_t* dst, int64_t n);

// n elements of a row stored as t (a multiple of DTypeBlockElems(t)); the type's reference
// dequantizer in the weight format table.
void DequantizeRow(DType t, const uint8_t* src, float* dst, int64_t n);

// Round-to-nearest-even; NaN stays NaN, overflow becomes inf.
void ConvertF32ToF16(const float* x, uint16_t* y, int64_t n);
void ConvertF32ToBf16(const float* x, uint16_t* y, int64_t n);
void ConvertF16ToF32(const uint16_t* x, float* y, int64_t n);
void ConvertBf16ToF32(const uint16_t* x, float* y, int64_t n);

}  // namespace pagellm
