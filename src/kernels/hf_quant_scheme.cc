#include "kernels/hf_quant_scheme.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "base/half.h"
#include "pagellm/check.h"

namespace pagellm {
namespace {

uint32_t LoadWord(const uint8_t* p, int64_t index) {
  uint32_t w;
  std::memcpy(&w, p + 4 * index, 4);
  return w;
}

uint16_t LoadHalf(const uint8_t* p, int64_t index) {
  uint16_t h;
  std::memcpy(&h, p + 2 * index, 2);
  return h;
}

std::string Shape(const WeightTensor& t) {
  return fmt::format("{} [{}, {}]", DTypeName(t.dtype), t.rows, t.cols);
}

Status CheckPart(std::string_view name, const WeightTensor& t, DType dtype, int64_t rows,
                 int64_t cols) {
  if (t.dtype != dtype || t.rows != rows || t.cols != cols) {
    return InvalidArgumentError(fmt::format("{}: expected {} [{}, {}], got {}", name,
                                            DTypeName(dtype), rows, cols, Shape(t)));
  }
  return Status::Ok();
}

// One matrix in a file's layout: code q, zero point z (offset included) and fp16 scale bits of
// W[o][k], the group of input k.
struct AwqSource {
  const uint8_t *qweight, *qzeros, *scales;
  int64_t out, group;
  int Group(int64_t k) const { return static_cast<int>(k / group); }
  int Code(int64_t k, int64_t o) const {
    return (LoadWord(qweight, k * (out / 8) + o / 8) >> (4 * kAwqNibble[o % 8])) & 15;
  }
  int Zero(int g, int64_t o) const {
    return (LoadWord(qzeros, g * (out / 8) + o / 8) >> (4 * kAwqNibble[o % 8])) & 15;
  }
  uint16_t Scale(int g, int64_t o) const { return LoadHalf(scales, g * out + o); }
};

struct GptqSource {
  const uint8_t *qweight, *qzeros, *scales;
  const int32_t* g_idx;  // [in]
  int64_t out;
  int bits, zero_offset;
  int Group(int64_t k) const { return g_idx[k]; }
  int Code(int64_t k, int64_t o) const {
    const int p = 32 / bits;
    return (LoadWord(qweight, (k / p) * out + o) >> (bits * (k % p))) & ((1 << bits) - 1);
  }
  int Zero(int g, int64_t o) const {
    const int p = 32 / bits;
    const int z = (LoadWord(qzeros, g * (out / p) + o / p) >> (bits * (o % p))) & ((1 << bits) - 1);
    return z + zero_offset;
  }
  uint16_t Scale(int g, int64_t o) const { return LoadHalf(scales, g * out + o); }
};

// rows x cols matrix in `dtype` (Q4_Z / Q4_Z128 codes q and zero points z, Q8_0 codes q - z, or
// F32 values),
// input j of the stored rows being file input perm[j] (perm null: j). Blocks of 32 stored inputs
// belong to one group (checked by the caller for the block formats). Walks 32 file inputs at a
// time over all outputs, so the file rows being read stay in cache; the blocks [b0, b1) of
// every row, written to out (row_bytes per row).
template <typename Source>
void RepackBlocks(const Source& src, DType dtype, const int32_t* perm, int64_t rows,
                  int64_t row_bytes, int64_t b0, int64_t b1, uint8_t* out) {
  for (int64_t b = b0; b < b1; ++b) {
    int64_t k[32];
    for (int i = 0; i < 32; ++i) k[i] = perm != nullptr ? perm[32 * b + i] : 32 * b + i;
    for (int64_t o = 0; o < rows; ++o) {
      uint8_t* row = out + o * row_bytes;
      if (dtype == DType::kF32) {
        for (int i = 0; i < 32; ++i) {
          const int g = src.Group(k[i]);
          const float v =
              F16ToF32(src.Scale(g, o)) * static_cast<float>(src.Code(k[i], o) - src.Zero(g, o));
          std::memcpy(row + 4 * (32 * b + i), &v, 4);
        }
        continue;
      }
      const int g = src.Group(k[0]);
      const int z = src.Zero(g, o);
      const uint16_t d = src.Scale(g, o);
      if (dtype == DType::kQ4_Z128) {
        // Sub-block b % 4 of the 128-block b / 4; its group is the whole 128-block's (checked
        // by the caller), so every sub-block writes the same d and z.
        uint8_t* blk = row + b / 4 * sizeof(BlockQ4_Z128);
        uint8_t qs[16] = {};
        for (int i = 0; i < 32; ++i) {
          qs[i % 16] |= static_cast<uint8_t>(src.Code(k[i], o) << (i < 16 ? 0 : 4));
        }
        const uint8_t zb = static_cast<uint8_t>(z);  // [0, 16]
        std::memcpy(blk, &d, 2);
        std::memcpy(blk + 2, &zb, 1);
        std::memcpy(blk + 3 + 16 * (b % 4), qs, 16);
      } else if (dtype == DType::kQ4_Z) {
        BlockQ4_Z blk{};
        blk.d = d;
        blk.z = static_cast<uint8_t>(z);  // [0, 16]
        for (int i = 0; i < 32; ++i) {
          blk.qs[i % 16] |= static_cast<uint8_t>(src.Code(k[i], o) << (i < 16 ? 0 : 4));
        }
        std::memcpy(row + b * sizeof(BlockQ4_Z), &blk, sizeof(blk));
      } else {
        CHECK(dtype == DType::kQ8_0);
        BlockQ8_0 blk;
        blk.d = d;
        for (int i = 0; i < 32; ++i) blk.qs[i] = static_cast<int8_t>(src.Code(k[i], o) - z);
        std::memcpy(row + b * sizeof(BlockQ8_0), &blk, sizeof(blk));
      }
    }
  }
}

// The matrix, its block columns split over the machine's threads (load time only: one pass
// over every weight, ~10 ns per weight per thread).
template <typename Source>
WeightMatrix Repack(const Source& src, DType dtype, const int32_t* perm, int64_t rows, int64_t cols,
                    WeightStore* store) {
  WeightMatrix m;
  m.dtype = dtype;
  m.rows = rows;
  m.cols = cols;
  uint8_t* out = store->Allocate(m.nbytes());
  // Threads split the columns into whole storage blocks (4 blocks of 32 for Q4_Z128, whose
  // scale and zero point each of its blocks writes).
  const int64_t unit = std::max<int64_t>(1, DTypeBlockElems(dtype) / 32);
  const int64_t units = cols / 32 / unit;
  // At least 2^20 weights per thread: below that a thread costs more than it saves.
  const int64_t threads =
      std::clamp<int64_t>(rows * cols >> 20, 1, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> workers;
  for (int64_t t = 1; t < threads; ++t) {
    workers.emplace_back([&, t] {
      RepackBlocks(src, dtype, perm, rows, m.row_bytes(), units * t / threads * unit,
                   units * (t + 1) / threads * unit, out);
    });
  }
  RepackBlocks(src, dtype, perm, rows, m.row_bytes(), 0, units / threads * unit, out);
  for (std::thread& w : workers) w.join();
  m.data = out;
  return m;
}

// Q8_0 holds an 8-bit matrix when every q - z fits int8.
template <typename Source>
bool CodesFitInt8(const Source& src, int64_t rows, int64_t cols) {
  for (int64_t k = 0; k < cols; ++k) {
    const int g = src.Group(k);
    for (int64_t o = 0; o < rows; ++o) {
      const int v = src.Code(k, o) - src.Zero(g, o);
      if (v < -128 || v > 127) return false;
    }
  }
  return true;
}

// PAGELLM_Q4_Z128=0 keeps 4-bit groups of 128 on Q4_Z (A/B runs of the two layouts; the
// matrices dequantize to the same values).
bool Q4Z128Enabled() {
  static const bool enabled = [] {
    const char* e = std::getenv("PAGELLM_Q4_Z128");
    return e == nullptr || std::string(e) != "0";
  }();
  return enabled;
}

void KeepParts(std::span<const WeightTensor> parts, WeightMatrix* m) {
  m->num_parts = static_cast<int>(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) m->parts[i] = parts[i];
}

StatusOr<WeightMatrix> BindAwq(const WeightFormat& f, std::span<const WeightTensor> parts,
                               int64_t rows, int64_t cols, WeightStore* store) {
  if (parts.size() != 3) return InvalidArgumentError("expected qweight, qzeros and scales");
  if (rows <= 0 || cols <= 0) return InvalidArgumentError("empty matrix");
  const int64_t g = f.quant_group;
  if (rows % 8 != 0 || cols % g != 0) {
    return InvalidArgumentError(
        fmt::format("[out, in] = [{}, {}]: out must be a multiple of 8 and in of the group size {}",
                    rows, cols, g));
  }
  RETURN_IF_ERROR(CheckPart("qweight", parts[0], DType::kI32, cols, rows / 8));
  RETURN_IF_ERROR(CheckPart("qzeros", parts[1], DType::kI32, cols / g, rows / 8));
  RETURN_IF_ERROR(CheckPart("scales", parts[2], DType::kF16, cols / g, rows));
  const AwqSource src{parts[0].data, parts[1].data, parts[2].data, rows, g};
  WeightMatrix m = Repack(src, g % 128 == 0 && Q4Z128Enabled() ? DType::kQ4_Z128 : DType::kQ4_Z,
                          nullptr, rows, cols, store);
  KeepParts(parts, &m);
  return m;
}

StatusOr<WeightMatrix> BindGptq(const WeightFormat& f, std::span<const WeightTensor> parts,
                                int64_t rows, int64_t cols, WeightStore* store) {
  if (parts.size() != 3 && parts.size() != 4) {
    return InvalidArgumentError("expected qweight, qzeros, scales and optionally g_idx");
  }
  if (rows <= 0 || cols <= 0) return InvalidArgumentError("empty matrix");
  const int bits = f.quant_bits;
  const int p = 32 / bits;
  const int64_t g = f.quant_group > 0 ? f.quant_group : cols;
  const int64_t groups = (cols + g - 1) / g;
  if (rows % p != 0 || cols % 32 != 0) {
    return InvalidArgumentError(fmt::format(
        "[out, in] = [{}, {}]: out must be a multiple of {} and in of 32", rows, cols, p));
  }
  RETURN_IF_ERROR(CheckPart("qweight", parts[0], DType::kI32, cols / p, rows));
  RETURN_IF_ERROR(CheckPart("qzeros", parts[1], DType::kI32, groups, rows / p));
  RETURN_IF_ERROR(CheckPart("scales", parts[2], DType::kF16, groups, rows));
  std::vector<int32_t> g_idx(static_cast<size_t>(cols));
  bool act_order = false;
  if (parts.size() == 4) {
    RETURN_IF_ERROR(CheckPart("g_idx", parts[3], DType::kI32, 1, cols));
    std::memcpy(g_idx.data(), parts[3].data, 4 * static_cast<size_t>(cols));
    for (int64_t k = 0; k < cols; ++k) {
      if (g_idx[k] < 0 || g_idx[k] >= groups) {
        return InvalidArgumentError(fmt::format(
            "g_idx: element {} is {}, outside the {} groups of the scales", k, g_idx[k], groups));
      }
      act_order = act_order || g_idx[k] != k / g;
    }
  } else {
    for (int64_t k = 0; k < cols; ++k) g_idx[k] = static_cast<int32_t>(k / g);
  }
  const GptqSource src{parts[0].data, parts[1].data, parts[2].data,      g_idx.data(),
                       rows,          bits,          f.quant_zero_offset};
  // Stored input j is file input perm[j]: sorted by group, stable.
  std::vector<int32_t> perm;
  if (act_order) {
    perm.resize(static_cast<size_t>(cols));
    std::iota(perm.begin(), perm.end(), 0);
    std::stable_sort(perm.begin(), perm.end(),
                     [&](int32_t a, int32_t b) { return g_idx[a] < g_idx[b]; });
  }
  // Whether every run of `size` stored inputs (from a multiple of size) has one group.
  auto runs_in_one_group = [&](int64_t size) {
    if (cols % size != 0) return false;
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t j0 = j / size * size;
      if (g_idx[act_order ? perm[j] : j] != g_idx[act_order ? perm[j0] : j0]) return false;
    }
    return true;
  };
  DType dtype = bits == 4 ? DType::kQ4_Z : DType::kQ8_0;
  if (!runs_in_one_group(32) || (bits == 8 && !CodesFitInt8(src, rows, cols))) {
    dtype = DType::kF32;
  } else if (dtype == DType::kQ4_Z && Q4Z128Enabled() && runs_in_one_group(128)) {
    dtype = DType::kQ4_Z128;
  }
  const bool permute = act_order && dtype != DType::kF32;
  WeightMatrix m = Repack(src, dtype, permute ? perm.data() : nullptr, rows, cols, store);
  if (permute) {
    m.input_perm = reinterpret_cast<const int32_t*>(
        store->Intern(reinterpret_cast<const uint8_t*>(perm.data()), 4 * cols));
  }
  KeepParts(parts, &m);
  return m;
}

}  // namespace

std::string CheckHfQuantParams(HfQuantMethod method, int bits, int64_t group_size) {
  const char* name = method == HfQuantMethod::kAwq ? "AWQ" : "GPTQ";
  if (method == HfQuantMethod::kAwq ? bits != 4 : (bits != 4 && bits != 8)) {
    return fmt::format("{} bits {} is not supported ({})", name, bits,
                       method == HfQuantMethod::kAwq ? "4" : "4 or 8");
  }
  const bool row = method == HfQuantMethod::kGptq && group_size == -1;
  if (!row && (group_size <= 0 || group_size % 32 != 0)) {
    return fmt::format("{} group_size {} is not supported (a multiple of 32{})", name, group_size,
                       method == HfQuantMethod::kGptq ? ", or -1" : "");
  }
  return {};
}

WeightFormat MakeHfQuantFormat(HfQuantMethod method, int bits, int64_t group_size,
                               int zero_offset) {
  CHECK(CheckHfQuantParams(method, bits, group_size).empty());
  WeightFormat f = GetWeightFormat(bits == 4 ? DType::kQ4_Z : DType::kQ8_0);
  f.ggml_type = -1;
  f.safetensors_dtype = {};
  f.quantize = nullptr;
  f.quant_bits = bits;
  f.quant_group = group_size > 0 ? group_size : 0;
  f.quant_zero_offset = zero_offset;
  if (method == HfQuantMethod::kAwq) {
    f.name = "AWQ";
    f.parts = {"qweight", "qzeros", "scales"};
    f.num_parts = 3;
    f.bind = BindAwq;
  } else {
    f.name = "GPTQ";
    f.parts = {"qweight", "qzeros", "scales", "g_idx"};
    f.num_parts = 4;
    f.bind = BindGptq;
  }
  return f;
}

}  // namespace pagellm
