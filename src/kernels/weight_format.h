// Weight formats as one table: one traits row per way of storing a weight matrix, holding what
// the file readers, the loader, the reference conversions, the MatMul dispatcher and the weight
// packing need to know about it. Callers ask the table; none names a format.
//
// A row's storage geometry (name, elements and bytes per block) is its DType's row in
// include/pagellm/dtype.h, so that DTypeRowBytes and friends keep working without the kernels;
// blocks of any size are expressible (32 for Q8_0 / Q4_0; a 256-element super-block for Q4_K).
//
// Multi-tensor formats (AWQ: qweight + qzeros + scales; GPTQ: + g_idx) name their source
// tensors in `parts` and repack them at load through `bind` into a layout the kernels stream
// (the `dtype` of their row), in buffers owned by the loaded model (WeightStore). Single-tensor
// formats bind in place: the file's tensor is the matrix. weight_format_test.cc binds such a
// format (codes + scales into Q4_0 blocks) and checks MatMul on it.
//
// Adding a single-tensor format:
//   1. include/pagellm/dtype.h: a DType and its geometry row (name, block elements, bytes).
//   2. quantize.h/.cc: its reference row dequantizer (and quantizer, if any).
//   3. Kernels: instantiate an existing family's block kernels for it (matmul_*.cc) or add a
//      family; a new activation quantization is an ActQuant entry picked in matmul.cc.
//   4. weight_format.cc: its row (GGUF id, safetensors name, alignment, the above, packed
//      layout if the AVX-512 kernels stream one, bind = BindInPlace).
//   5. Tests: quantize_test.cc (reference values), matmul_test.cc (every level, bitwise).
// A multi-tensor format is a row whose bind repacks its `parts` into an existing dtype.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "base/thread_pool.h"
#include "kernels/weight_matrix.h"
#include "kernels/weight_store.h"
#include "pagellm/dtype.h"
#include "pagellm/status.h"

namespace pagellm {

namespace kernels_internal {
struct MatMulKernels;  // matmul_internal.h
}  // namespace kernels_internal

// How MatMul multiplies a format (matmul.h).
enum class MatMulFamily : uint8_t {
  kNone,     // not a matmul weight (I32 auxiliary tensors)
  kFloat,    // weights widened to fp32 (exact), fp32 FMA over fp32 activations
  kInt8Dot,  // exact int32 block dot products with activations quantized per act_quant
  // The GGUF-only block types: each row decoded to int8 codes and integer sub-block scales,
  // then exact int32 dot products with activations quantized per act_quant
  // (matmul_decode_internal.h).
  kInt8Decode,
};

// How the activations of an integer matmul are quantized (matmul_internal.h, QuantActs).
enum class ActQuant : uint8_t {
  kNone,        // fp32 activations (MatMulFamily::kFloat)
  kQ8Block32,   // Q8_0-style: per token, blocks of 32, fp32 d = amax / 127, int8 q, bias -c*sum q
  kQ8Block256,  // Q8_K-style: per token, blocks of 256, fp32 d = amax / 127, int8 q, per-16 sums
};

// The copy of a format's matrices that the AVX-512 kernels stream (packed_weights.h).
enum class PackedLayout : uint8_t {
  kNone,         // the kernels read the rows as stored
  kQuantPairs,   // QuantPackedLayout: 16-row groups of block pairs, codes then fp16 scales
  kF16Lanes,     // F16LaneLayout: 16-row groups, each k's 16 rows in fp16 lanes
  kQ4ZQuads,     // Q4ZPackedLayout: 16-row groups of block quads, codes, fp16 scales, zeros
  kQ4Z128Quads,  // Q4Z128PackedLayout: as kQ4ZQuads, one scale and zero point per quad
  kKQuantLanes,  // KQuantPackedLayout: 16-row groups of super-blocks, code planes, int8 scales
};

struct WeightFormat;

// n elements of one row (n a multiple of the block size).
using DequantizeRowFn = void (*)(const uint8_t* src, float* dst, int64_t n);
using QuantizeRowFn = void (*)(const float* x, uint8_t* dst, int64_t n);
// Bytes of the packed copy of a rows x cols matrix, and the packer that writes it.
using PackedBytesFn = int64_t (*)(int64_t rows, int64_t cols);
using PackWeightsFn = void (*)(const WeightMatrix& w, uint8_t* out, ThreadPool* pool);
// Load-time hook: the source tensors of one rows x cols matrix, in the order of f.parts, to
// the matrix the kernels read (dtype f.dtype). A repack writes into buffers from `store`.
// Errors (a mis-shaped or misaligned part) are Status; the caller names the file and tensor.
using BindWeightFn = StatusOr<WeightMatrix> (*)(const WeightFormat& f,
                                                std::span<const WeightTensor> parts, int64_t rows,
                                                int64_t cols, WeightStore* store);

struct WeightFormat {
  std::string_view name;
  // The storage type the kernels read: the format's own for single-tensor formats, the layout
  // a multi-tensor format's bind repacks into.
  DType dtype = DType::kF32;
  int64_t block_elems = 1;               // DTypeBlockElems(dtype)
  int64_t block_bytes = 0;               // DTypeBlockBytes(dtype)
  int ggml_type = -1;                    // GGUF tensor type id (ggml.h `enum ggml_type`); -1: none
  std::string_view safetensors_dtype;    // safetensors header "dtype"; empty: none
  int64_t align = 1;                     // bytes; the kernels read elements in place
  DequantizeRowFn dequantize = nullptr;  // reference, exact; null: not convertible
  QuantizeRowFn quantize = nullptr;      // ggml-compatible rounding; null: none
  MatMulFamily matmul = MatMulFamily::kNone;
  ActQuant act_quant = ActQuant::kNone;
  // kInt8Dot: c of the unsigned weight code u = w + c the VNNI kernels multiply (Q4_0: 8,
  // Q8_0: 128); PrepareQuantActs folds -c * sum(q) into each activation block. Q4_Z(128): 1, so
  // that the field is -sum(q), which the kernels multiply by each block's zero point. kInt8Decode
  // with kQ8Block32: -1, so that the bias field is the block's +sum(q) (the min term).
  int32_t act_code_offset = 0;
  const kernels_internal::MatMulKernels* kernels = nullptr;  // block kernels per SIMD level
  PackedLayout packed = PackedLayout::kNone;
  PackedBytesFn packed_bytes = nullptr;
  PackWeightsFn pack = nullptr;
  // Names of the source tensors of one matrix: the suffix that replaces "weight" in the
  // matrix's tensor name ({"weight"} for single-tensor formats; AWQ: qweight, qzeros, scales).
  std::array<std::string_view, kMaxWeightParts> parts = {"weight"};
  int num_parts = 1;
  BindWeightFn bind = nullptr;
  // Integer checkpoint formats (kernels/hf_quant_scheme.h): bits per code, input elements per
  // scale group (0: the whole row), and the constant added to every stored zero point (GPTQ's
  // v1 checkpoint format: 1). Set per model by MakeHfQuantFormat; 0 for the other rows.
  int quant_bits = 0;
  int64_t quant_group = 0;
  int quant_zero_offset = 0;
};

// The row of a storage type (every DType has one).
const WeightFormat& GetWeightFormat(DType t);
// The row with this GGUF type id / safetensors dtype name, or null when none is loadable.
const WeightFormat* FindWeightFormatByGgmlType(uint32_t id);
const WeightFormat* FindWeightFormatBySafetensorsDtype(std::string_view name);

// The bind of single-tensor formats: the one part, checked for f.align, is the matrix.
StatusOr<WeightMatrix> BindInPlace(const WeightFormat& f, std::span<const WeightTensor> parts,
                                   int64_t rows, int64_t cols, WeightStore* store);

}  // namespace pagellm
