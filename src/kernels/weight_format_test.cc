#include "kernels/weight_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/half.h"
#include "kernels/kernels_test_util.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/packed_weights.h"

namespace pagellm {
namespace {

using testing_util::AvailableLevels;
using testing_util::RandomVector;

constexpr DType kAllDTypes[] = {
    DType::kF32,  DType::kF16,  DType::kBF16,   DType::kQ8_0,   DType::kQ4_0, DType::kI32,
    DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,   DType::kQ2_K,   DType::kQ3_K, DType::kQ4_K,
    DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS, DType::kQ4_Z, DType::kQ4_Z128};
static_assert(sizeof(kAllDTypes) / sizeof(kAllDTypes[0]) == kNumDTypes);

TEST(WeightFormatTest, EveryDTypeHasOneConsistentRow) {
  for (DType t : kAllDTypes) {
    const WeightFormat& f = GetWeightFormat(t);
    EXPECT_EQ(f.dtype, t);
    EXPECT_EQ(f.name, DTypeName(t));
    EXPECT_EQ(f.block_elems, DTypeBlockElems(t));
    EXPECT_EQ(f.block_bytes, DTypeBlockBytes(t));
    EXPECT_EQ(f.num_parts, 1) << f.name;
    if (f.ggml_type >= 0) {
      EXPECT_EQ(FindWeightFormatByGgmlType(static_cast<uint32_t>(f.ggml_type)), &f);
    }
    if (!f.safetensors_dtype.empty()) {
      EXPECT_EQ(FindWeightFormatBySafetensorsDtype(f.safetensors_dtype), &f);
    }
    if (f.matmul == MatMulFamily::kNone) continue;
    // A matmul format dequantizes, quantizes, binds, and has a kernel at every level.
    EXPECT_NE(f.dequantize, nullptr) << f.name;
    EXPECT_NE(f.quantize, nullptr) << f.name;
    EXPECT_NE(f.bind, nullptr) << f.name;
    ASSERT_NE(f.kernels, nullptr) << f.name;
    for (auto* fn : f.kernels->block) EXPECT_NE(fn, nullptr) << f.name;
    EXPECT_EQ(f.matmul != MatMulFamily::kFloat, f.act_quant != ActQuant::kNone) << f.name;
    EXPECT_EQ(f.packed != PackedLayout::kNone, f.pack != nullptr) << f.name;
    EXPECT_EQ(f.packed != PackedLayout::kNone, f.packed_bytes != nullptr) << f.name;
    EXPECT_TRUE(IsMatMulWeightType(t));
  }
  EXPECT_FALSE(IsMatMulWeightType(DType::kI32));
  // The GGUF ids of ggml.h and the safetensors names this project loads; others have no row.
  EXPECT_EQ(FindWeightFormatByGgmlType(0)->dtype, DType::kF32);
  EXPECT_EQ(FindWeightFormatByGgmlType(1)->dtype, DType::kF16);
  EXPECT_EQ(FindWeightFormatByGgmlType(2)->dtype, DType::kQ4_0);
  EXPECT_EQ(FindWeightFormatByGgmlType(8)->dtype, DType::kQ8_0);
  EXPECT_EQ(FindWeightFormatByGgmlType(30)->dtype, DType::kBF16);
  EXPECT_EQ(FindWeightFormatByGgmlType(12)->dtype, DType::kQ4_K);
  EXPECT_EQ(FindWeightFormatByGgmlType(14)->dtype, DType::kQ6_K);
  EXPECT_EQ(FindWeightFormatByGgmlType(23)->dtype, DType::kIQ4_XS);
  EXPECT_EQ(FindWeightFormatByGgmlType(16), nullptr);  // IQ2_XXS
  EXPECT_EQ(FindWeightFormatByGgmlType(15), nullptr);  // Q8_K (activations only in ggml)
  EXPECT_EQ(FindWeightFormatBySafetensorsDtype("I32")->dtype, DType::kI32);  // AWQ / GPTQ parts
  EXPECT_EQ(FindWeightFormatBySafetensorsDtype("I64"), nullptr);
  EXPECT_EQ(FindWeightFormatBySafetensorsDtype("Q4_0"), nullptr);
}

TEST(WeightFormatTest, BindInPlaceViewsTheTensorAndChecksAlignment) {
  std::vector<uint8_t> bytes(4 * 64 + 4);
  const WeightFormat& f = GetWeightFormat(DType::kF32);
  WeightTensor t{bytes.data(), DType::kF32, 4, 16};
  while (reinterpret_cast<uintptr_t>(t.data) % 4 != 0) ++t.data;
  StatusOr<WeightMatrix> m = f.bind(f, {&t, 1}, 4, 16, nullptr);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->data, t.data);
  EXPECT_EQ(m->dtype, DType::kF32);
  EXPECT_EQ(m->num_parts, 0);
  ++t.data;
  m = f.bind(f, {&t, 1}, 4, 16, nullptr);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "data is not 4-byte aligned");
}

// ---- A multi-tensor format, defined only here ------------------------------------------------
//
// "codes + scales", group size 32, symmetric 4-bit, in the shape of the HF int4 checkpoints:
//   codes  I32 [rows][cols / 8]: element 8j + i of a row is the unsigned nibble u at bits 4i..4i+3
//          of word j (u in [0, 15], weight = scale * (u - 8));
//   scales F16 [rows][cols / 32]: one scale per group of 32 elements.
// Its bind repacks them into Q4_0 blocks (d = scale, qs[i] = u_i | u_{i+16} << 4), a layout the
// kernels already stream, so MatMul runs on it unchanged.

StatusOr<WeightMatrix> BindCodesScales(const WeightFormat& f, std::span<const WeightTensor> parts,
                                       int64_t rows, int64_t cols, WeightStore* store) {
  if (parts.size() != 2) return InvalidArgumentError("expected codes and scales");
  const WeightTensor& codes = parts[0];
  const WeightTensor& scales = parts[1];
  if (cols % 32 != 0) return InvalidArgumentError("cols is not a multiple of the group size 32");
  if (codes.dtype != DType::kI32 || codes.rows != rows || codes.cols != cols / 8) {
    return InvalidArgumentError("codes: expected I32 [rows][cols / 8]");
  }
  if (scales.dtype != DType::kF16 || scales.rows != rows || scales.cols != cols / 32) {
    return InvalidArgumentError("scales: expected F16 [rows][cols / 32]");
  }
  WeightMatrix m;
  m.dtype = f.dtype;
  m.rows = rows;
  m.cols = cols;
  uint8_t* out = store->Allocate(m.nbytes());
  for (int64_t r = 0; r < rows; ++r) {
    auto* blocks = reinterpret_cast<BlockQ4_0*>(out + r * m.row_bytes());
    for (int64_t g = 0; g < cols / 32; ++g) {
      std::memcpy(&blocks[g].d, scales.data + 2 * (r * scales.cols + g), 2);
      uint8_t u[32];
      for (int j = 0; j < 4; ++j) {
        uint32_t word;
        std::memcpy(&word, codes.data + 4 * (r * codes.cols + 4 * g + j), 4);
        for (int i = 0; i < 8; ++i) u[8 * j + i] = (word >> (4 * i)) & 15;
      }
      for (int i = 0; i < 16; ++i) blocks[g].qs[i] = static_cast<uint8_t>(u[i] | (u[i + 16] << 4));
    }
  }
  m.data = out;
  m.num_parts = 2;
  m.parts[0] = codes;
  m.parts[1] = scales;
  return m;
}

WeightFormat CodesScalesFormat() {
  WeightFormat f = GetWeightFormat(DType::kQ4_0);  // the layout it binds into
  f.name = "test-codes-scales";
  f.ggml_type = -1;
  f.quantize = nullptr;
  f.parts = {"qcodes", "scales"};
  f.num_parts = 2;
  f.bind = BindCodesScales;
  return f;
}

struct CodesScales {
  std::vector<uint32_t> codes;   // [rows][cols / 8]
  std::vector<uint16_t> scales;  // [rows][cols / 32]
  std::vector<int> u;            // [rows][cols], the nibbles
  int64_t rows = 0, cols = 0;
  WeightTensor CodesTensor() const {
    return {reinterpret_cast<const uint8_t*>(codes.data()), DType::kI32, rows, cols / 8};
  }
  WeightTensor ScalesTensor() const {
    return {reinterpret_cast<const uint8_t*>(scales.data()), DType::kF16, rows, cols / 32};
  }
  float Scale(int64_t r, int64_t g) const { return F16ToF32(scales[r * (cols / 32) + g]); }
};

CodesScales RandomCodesScales(std::mt19937& rng, int64_t rows, int64_t cols) {
  CodesScales s;
  s.rows = rows;
  s.cols = cols;
  s.codes.assign(rows * cols / 8, 0);
  s.u.resize(rows * cols);
  std::uniform_int_distribution<int> nibble(0, 15);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  for (int64_t k = 0; k < rows * cols; ++k) {
    s.u[k] = nibble(rng);
    s.codes[k / 8] |= static_cast<uint32_t>(s.u[k]) << (4 * (k % 8));
  }
  for (int64_t k = 0; k < rows * cols / 32; ++k) s.scales.push_back(F32ToF16(scale(rng)));
  return s;
}

TEST(WeightFormatTest, MultiTensorBindRepacksAndMatchesTheReferenceMatMul) {
  std::mt19937 rng(16);
  const WeightFormat f = CodesScalesFormat();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{40, 96}, {64, 256}}) {
    const CodesScales src = RandomCodesScales(rng, rows, cols);
    const WeightTensor parts[] = {src.CodesTensor(), src.ScalesTensor()};
    WeightStore store;
    StatusOr<WeightMatrix> bound = f.bind(f, {parts, 2}, rows, cols, &store);
    ASSERT_TRUE(bound.ok()) << bound.status().message();
    const WeightMatrix& w = *bound;
    EXPECT_EQ(w.dtype, DType::kQ4_0);
    EXPECT_EQ(w.num_parts, 2);
    EXPECT_EQ(w.parts[0].data, parts[0].data);
    EXPECT_GE(store.bytes(), w.nbytes());

    // The repacked matrix dequantizes to the format's own definition, exactly.
    const std::vector<float> wf = testing_util::Dequantized(w);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k < cols; ++k) {
        ASSERT_EQ(wf[r * cols + k],
                  src.Scale(r, k / 32) * static_cast<float>(src.u[r * cols + k] - 8))
            << r << "," << k;
      }
    }

    // Reference MatMul from the source tensors in the kernels' scheme (matmul_internal.h):
    // activations quantized per block of 32, acc = fma(isum_b, d_w * d_x, acc) block by block.
    const int64_t n = 5, nb = cols / 32;
    const std::vector<float> x = RandomVector(rng, n * cols);
    std::vector<float> ref(n * rows);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<int8_t> q(cols);
      std::vector<float> dx(nb);
      for (int64_t b = 0; b < nb; ++b) {
        kernels_internal::QuantizeActBlock(&x[t * cols + 32 * b], &q[32 * b], &dx[b]);
      }
      for (int64_t r = 0; r < rows; ++r) {
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          int32_t isum = 0;
          for (int i = 0; i < 32; ++i) isum += (src.u[r * cols + 32 * b + i] - 8) * q[32 * b + i];
          acc = std::fma(static_cast<float>(isum), src.Scale(r, b) * dx[b], acc);
        }
        ref[t * rows + r] = acc;
      }
    }
    PackedWeights packed;
    packed.Add(w);
    for (SimdLevel level : AvailableLevels()) {
      for (const WeightMatrix* m : {&w, &packed.Get(w)}) {
        std::vector<float> y(n * rows, -1.0f);
        MatMulAtLevel(level, *m, x.data(), n, y.data(), nullptr);
        EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)))
            << SimdLevelName(level) << (m->packed != nullptr ? " packed" : "");
      }
    }
  }
}

TEST(WeightFormatTest, MultiTensorBindRejectsMisshapedParts) {
  std::mt19937 rng(17);
  const WeightFormat f = CodesScalesFormat();
  const CodesScales src = RandomCodesScales(rng, 8, 64);
  WeightStore store;
  WeightTensor parts[] = {src.CodesTensor(), src.ScalesTensor()};
  parts[1].cols = 3;
  StatusOr<WeightMatrix> m = f.bind(f, {parts, 2}, 8, 64, &store);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "scales: expected F16 [rows][cols / 32]");
  parts[1] = src.ScalesTensor();
  parts[0].dtype = DType::kF16;
  EXPECT_FALSE(f.bind(f, {parts, 2}, 8, 64, &store).ok());
  EXPECT_FALSE(f.bind(f, {parts, 1}, 8, 64, &store).ok());
  EXPECT_EQ(store.bytes(), 0);
}

}  // namespace
}  // namespace pagellm
