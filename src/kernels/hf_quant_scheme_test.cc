#include "kernels/hf_quant_scheme.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "base/half.h"
#include "kernels/kernels_test_util.h"
#include "kernels/matmul.h"

namespace pagellm {
namespace {

using testing_util::AvailableLevels;
using testing_util::RandomVector;

// A random checkpoint matrix in the definitions of hf_quant_scheme.h, packed here from codes
// q[k][o], zeros z[g][o] (as stored) and scales s[g][o]; W(o, k) is the definition's value.
struct Checkpoint {
  HfQuantMethod method = HfQuantMethod::kAwq;
  int bits = 4, zero_offset = 0;
  int64_t rows = 0, cols = 0, groups = 0;
  std::vector<int> q, z, g_idx;
  std::vector<uint16_t> s;
  std::vector<uint32_t> qweight, qzeros;
  std::vector<int32_t> g_idx_tensor;

  float W(int64_t o, int64_t k) const {
    const int g = g_idx[k];
    return F16ToF32(s[g * rows + o]) *
           static_cast<float>(q[k * rows + o] - (z[g * rows + o] + zero_offset));
  }
  std::vector<WeightTensor> Parts(bool with_g_idx) const {
    const int p = 32 / bits;
    std::vector<WeightTensor> t;
    const auto* qw = reinterpret_cast<const uint8_t*>(qweight.data());
    const auto* qz = reinterpret_cast<const uint8_t*>(qzeros.data());
    const auto* sc = reinterpret_cast<const uint8_t*>(s.data());
    if (method == HfQuantMethod::kAwq) {
      t = {{qw, DType::kI32, cols, rows / 8},
           {qz, DType::kI32, groups, rows / 8},
           {sc, DType::kF16, groups, rows}};
    } else {
      t = {{qw, DType::kI32, cols / p, rows},
           {qz, DType::kI32, groups, rows / p},
           {sc, DType::kF16, groups, rows}};
      if (with_g_idx) {
        t.push_back({reinterpret_cast<const uint8_t*>(g_idx_tensor.data()), DType::kI32, 1, cols});
      }
    }
    return t;
  }
};

// g_idx: group of each input (size cols); zeros drawn from [zlo, zhi] (stored values).
Checkpoint MakeCheckpoint(std::mt19937& rng, HfQuantMethod method, int bits, int64_t rows,
                          int64_t cols, std::vector<int> g_idx, int zlo, int zhi, int zero_offset) {
  Checkpoint c;
  c.method = method;
  c.bits = bits;
  c.zero_offset = zero_offset;
  c.rows = rows;
  c.cols = cols;
  c.g_idx = std::move(g_idx);
  c.groups = *std::max_element(c.g_idx.begin(), c.g_idx.end()) + 1;
  const int maxq = (1 << bits) - 1;
  std::uniform_int_distribution<int> code(0, maxq), zero(zlo, zhi);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  c.q.resize(cols * rows);
  for (int& v : c.q) v = code(rng);
  c.z.resize(c.groups * rows);
  for (int& v : c.z) v = zero(rng);
  for (int64_t i = 0; i < c.groups * rows; ++i) c.s.push_back(F32ToF16(scale(rng)));
  const int p = 32 / bits;
  if (method == HfQuantMethod::kAwq) {
    c.qweight.assign(cols * rows / 8, 0);
    c.qzeros.assign(c.groups * rows / 8, 0);
    for (int64_t o = 0; o < rows; ++o) {
      const int shift = 4 * kAwqNibble[o % 8];
      for (int64_t k = 0; k < cols; ++k) {
        c.qweight[k * (rows / 8) + o / 8] |= static_cast<uint32_t>(c.q[k * rows + o]) << shift;
      }
      for (int64_t g = 0; g < c.groups; ++g) {
        c.qzeros[g * (rows / 8) + o / 8] |= static_cast<uint32_t>(c.z[g * rows + o]) << shift;
      }
    }
  } else {
    c.qweight.assign(cols / p * rows, 0);
    c.qzeros.assign(c.groups * rows / p, 0);
    for (int64_t k = 0; k < cols; ++k) {
      for (int64_t o = 0; o < rows; ++o) {
        c.qweight[(k / p) * rows + o] |= static_cast<uint32_t>(c.q[k * rows + o])
                                         << (bits * (k % p));
      }
    }
    for (int64_t g = 0; g < c.groups; ++g) {
      for (int64_t o = 0; o < rows; ++o) {
        c.qzeros[g * (rows / p) + o / p] |= static_cast<uint32_t>(c.z[g * rows + o])
                                            << (bits * (o % p));
      }
    }
    c.g_idx_tensor.assign(c.g_idx.begin(), c.g_idx.end());
  }
  return c;
}

std::vector<int> Sequential(int64_t cols, int64_t group) {
  std::vector<int> g(cols);
  for (int64_t k = 0; k < cols; ++k) g[k] = static_cast<int>(k / group);
  return g;
}

// GPTQ act-order: g_idx[perm[i]] = i / group for a random permutation.
std::vector<int> ActOrder(std::mt19937& rng, int64_t cols, int64_t group) {
  std::vector<int> perm(cols), g(cols);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int64_t i = 0; i < cols; ++i) g[perm[i]] = static_cast<int>(i / group);
  return g;
}

// The bound matrix dequantizes (input permutation undone) to the definition, exactly.
void ExpectDefinition(const WeightMatrix& m, const Checkpoint& c) {
  const std::vector<float> wf = testing_util::Dequantized(m);
  for (int64_t o = 0; o < c.rows; ++o) {
    for (int64_t j = 0; j < c.cols; ++j) {
      const int64_t k = m.input_perm != nullptr ? m.input_perm[j] : j;
      ASSERT_EQ(wf[o * c.cols + j], c.W(o, k)) << o << "," << k;
    }
  }
}

StatusOr<WeightMatrix> Bind(const Checkpoint& c, int64_t group, WeightStore* store,
                            bool with_g_idx = true) {
  const WeightFormat f = MakeHfQuantFormat(c.method, c.bits, group, c.zero_offset);
  const std::vector<WeightTensor> parts = c.Parts(with_g_idx);
  return f.bind(f, parts, c.rows, c.cols, store);
}

// Groups of 32 and 64 repack into Q4_Z, multiples of 128 into Q4_Z128 (one scale and zero point
// per 128 inputs).
TEST(HfQuantSchemeTest, AwqRepacksExactlyIntoQ4_Z) {
  std::mt19937 rng(3);
  for (int64_t group : {32, 64, 128, 256}) {
    const Checkpoint c =
        MakeCheckpoint(rng, HfQuantMethod::kAwq, 4, 24, 256, Sequential(256, group), 0, 15, 0);
    WeightStore store;
    StatusOr<WeightMatrix> m = Bind(c, group, &store);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ(m->dtype, group % 128 == 0 ? DType::kQ4_Z128 : DType::kQ4_Z) << group;
    EXPECT_EQ(m->input_perm, nullptr);
    EXPECT_EQ(m->num_parts, 3);
    ExpectDefinition(*m, c);
  }
  // 2^21 weights: the repack splits the block columns over threads (when the machine has them).
  const Checkpoint big =
      MakeCheckpoint(rng, HfQuantMethod::kAwq, 4, 512, 4096, Sequential(4096, 128), 0, 15, 0);
  WeightStore store;
  StatusOr<WeightMatrix> m = Bind(big, 128, &store);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->dtype, DType::kQ4_Z128);
  ExpectDefinition(*m, big);
}

TEST(HfQuantSchemeTest, GptqRepacksExactlyUnderBothZeroConventions) {
  std::mt19937 rng(4);
  for (int offset : {0, 1}) {
    for (int64_t group : {32, 128, -1}) {
      const int64_t g = group > 0 ? group : 160;
      // v1 files store z - 1 for z in [1, 16]; v2 store z in [0, 15].
      const Checkpoint c =
          MakeCheckpoint(rng, HfQuantMethod::kGptq, 4, 16, 160, Sequential(160, g), 0, 15, offset);
      WeightStore store;
      StatusOr<WeightMatrix> m = Bind(c, group, &store, /*with_g_idx=*/group != 128);
      ASSERT_TRUE(m.ok()) << m.status().message();
      // 160 inputs: groups of 128 leave a ragged last group, and one group per row is not a
      // multiple of 128 either, so every case stays on Q4_Z.
      EXPECT_EQ(m->dtype, DType::kQ4_Z) << group;
      EXPECT_EQ(m->input_perm, nullptr);
      ExpectDefinition(*m, c);
    }
  }
}

TEST(HfQuantSchemeTest, GptqEightBitsIsQ8_0WhenCodesFitElseF32) {
  std::mt19937 rng(5);
  // Symmetric: z = 128 (v1 stores 127).
  Checkpoint sym =
      MakeCheckpoint(rng, HfQuantMethod::kGptq, 8, 8, 64, Sequential(64, 32), 127, 127, 1);
  WeightStore store;
  StatusOr<WeightMatrix> m = Bind(sym, 32, &store);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->dtype, DType::kQ8_0);
  ExpectDefinition(*m, sym);
  // Asymmetric with zeros near 0: codes up to 255 - z do not fit int8.
  Checkpoint asym =
      MakeCheckpoint(rng, HfQuantMethod::kGptq, 8, 8, 64, Sequential(64, 32), 0, 20, 0);
  m = Bind(asym, 32, &store);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->dtype, DType::kF32);
  ExpectDefinition(*m, asym);
}

TEST(HfQuantSchemeTest, ActOrderPermutesInputsAndMatMulGathersThem) {
  std::mt19937 rng(6);
  const int64_t cols = 256;
  const std::vector<int> g_idx = ActOrder(rng, cols, 32);
  const Checkpoint a = MakeCheckpoint(rng, HfQuantMethod::kGptq, 4, 40, cols, g_idx, 0, 15, 1);
  const Checkpoint b = MakeCheckpoint(rng, HfQuantMethod::kGptq, 4, 24, cols, g_idx, 0, 15, 1);
  WeightStore store;
  StatusOr<WeightMatrix> ma = Bind(a, 32, &store), mb = Bind(b, 32, &store);
  ASSERT_TRUE(ma.ok() && mb.ok());
  ASSERT_NE(ma->input_perm, nullptr);
  EXPECT_EQ(ma->input_perm, mb->input_perm);  // one interned permutation
  ExpectDefinition(*ma, a);
  ExpectDefinition(*mb, b);
  // MatMul with the permutation == MatMul of the unpermuted matrix on gathered inputs.
  const int64_t n = 3;
  const std::vector<float> x = RandomVector(rng, n * cols);
  std::vector<float> xp(n * cols);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < cols; ++j) xp[t * cols + j] = x[t * cols + ma->input_perm[j]];
  }
  for (SimdLevel level : AvailableLevels()) {
    WeightMatrix plain = *ma;
    plain.input_perm = nullptr;
    std::vector<float> want(n * a.rows), got(n * a.rows), got_b(n * b.rows), many_a(n * a.rows),
        many_b(n * b.rows);
    MatMulAtLevel(level, plain, xp.data(), n, want.data(), nullptr);
    MatMulAtLevel(level, *ma, x.data(), n, got.data(), nullptr);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << SimdLevelName(level);
    MatMulAtLevel(level, *mb, x.data(), n, got_b.data(), nullptr);
    MatMulManyAtLevel(level, {{&*ma, many_a.data()}, {&*mb, many_b.data()}}, x.data(), n, nullptr);
    EXPECT_EQ(0, std::memcmp(got.data(), many_a.data(), got.size() * 4));
    EXPECT_EQ(0, std::memcmp(got_b.data(), many_b.data(), got_b.size() * 4));
  }
  // A share of the stored blocks (a tensor-parallel rank's, model/tensor_parallel_shard.h):
  // stored columns [64, 160) with their permutation entries, multiplying the whole x of
  // input_cols columns == the same columns of the unpermuted matrix on the gathered inputs.
  const int64_t c0 = 64, cn = 96;
  WeightMatrix share = *ma;
  uint8_t* share_bytes = store.Allocate(a.rows * DTypeRowBytes(share.dtype, cn));
  for (int64_t r = 0; r < a.rows; ++r)
    std::memcpy(share_bytes + r * DTypeRowBytes(share.dtype, cn),
                ma->row(r) + DTypeRowBytes(share.dtype, c0), DTypeRowBytes(share.dtype, cn));
  share.data = share_bytes;
  share.cols = cn;
  share.input_perm = ma->input_perm + c0;
  share.input_cols = cols;
  WeightMatrix share_plain = share;
  share_plain.input_perm = nullptr;
  share_plain.input_cols = 0;
  std::vector<float> xs(n * cn);
  for (int64_t t = 0; t < n; ++t) std::copy_n(xp.data() + t * cols + c0, cn, xs.data() + t * cn);
  for (SimdLevel level : AvailableLevels()) {
    std::vector<float> want(n * a.rows), got(n * a.rows);
    MatMulAtLevel(level, share_plain, xs.data(), n, want.data(), nullptr);
    MatMulAtLevel(level, share, x.data(), n, got.data(), nullptr);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << SimdLevelName(level);
  }
}

// Act-order groups of 128 sort into runs of 128 inputs with one group: Q4_Z128 with the
// permutation, equal at every level to MatMul of the unpermuted matrix on gathered inputs.
// Act-order groups of 64 share Q4_Z blocks but not runs of 128: Q4_Z.
TEST(HfQuantSchemeTest, ActOrderGroupsOf128UseQ4_Z128) {
  std::mt19937 rng(12);
  const int64_t cols = 512;
  for (int64_t group : {64, 128}) {
    const Checkpoint c = MakeCheckpoint(rng, HfQuantMethod::kGptq, 4, 48, cols,
                                        ActOrder(rng, cols, group), 0, 15, 0);
    WeightStore store;
    StatusOr<WeightMatrix> m = Bind(c, group, &store);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ(m->dtype, group == 128 ? DType::kQ4_Z128 : DType::kQ4_Z);
    ASSERT_NE(m->input_perm, nullptr);
    ExpectDefinition(*m, c);
    const int64_t n = 2;
    const std::vector<float> x = RandomVector(rng, n * cols);
    std::vector<float> xp(n * cols);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < cols; ++j) xp[t * cols + j] = x[t * cols + m->input_perm[j]];
    }
    for (SimdLevel level : AvailableLevels()) {
      WeightMatrix plain = *m;
      plain.input_perm = nullptr;
      std::vector<float> want(n * c.rows), got(n * c.rows);
      MatMulAtLevel(level, plain, xp.data(), n, want.data(), nullptr);
      MatMulAtLevel(level, *m, x.data(), n, got.data(), nullptr);
      EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4)) << SimdLevelName(level);
    }
  }
}

TEST(HfQuantSchemeTest, IrregularActOrderGroupsFallBackToF32) {
  std::mt19937 rng(7);
  // Groups of 20 (g_idx from a quantizer with an unusual group size): blocks of 32 would
  // span groups, so the matrix is F32 in the file's input order.
  const std::vector<int> g_idx = ActOrder(rng, 160, 20);
  const Checkpoint c = MakeCheckpoint(rng, HfQuantMethod::kGptq, 4, 8, 160, g_idx, 0, 15, 0);
  WeightStore store;
  const WeightFormat f = MakeHfQuantFormat(HfQuantMethod::kGptq, 4, 32, 0);
  StatusOr<WeightMatrix> m = f.bind(f, c.Parts(true), c.rows, c.cols, &store);
  ASSERT_FALSE(m.ok());  // 8 groups of 20 where ceil(160 / 32) = 5 are expected
  EXPECT_EQ(m.status().message(), "qzeros: expected I32 [5, 1], got I32 [8, 1]");
  // With group_size 20's group count the layout is consistent, but not blockable.
  Checkpoint c5 = c;
  for (int& g : c5.g_idx) g = g * 5 / 8;  // 5 uneven groups
  for (int64_t k = 0; k < c.cols; ++k) c5.g_idx_tensor[k] = c5.g_idx[k];
  c5.groups = 5;
  c5.z.resize(5 * c.rows);
  c5.s.resize(5 * c.rows);
  c5.qzeros.resize(5 * c.rows / 8);
  m = Bind(c5, 32, &store);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->dtype, DType::kF32);
  EXPECT_EQ(m->input_perm, nullptr);
  ExpectDefinition(*m, c5);
}

TEST(HfQuantSchemeTest, MisshapedPartsAndBadGroupIndicesAreErrors) {
  std::mt19937 rng(8);
  const Checkpoint c =
      MakeCheckpoint(rng, HfQuantMethod::kGptq, 4, 16, 64, Sequential(64, 32), 0, 15, 1);
  const WeightFormat f = MakeHfQuantFormat(HfQuantMethod::kGptq, 4, 32, 1);
  WeightStore store;
  std::vector<WeightTensor> parts = c.Parts(true);
  parts[0].rows = 7;
  EXPECT_EQ(f.bind(f, parts, 16, 64, &store).status().message(),
            "qweight: expected I32 [8, 16], got I32 [7, 16]");
  parts = c.Parts(true);
  parts[2].dtype = DType::kBF16;
  EXPECT_EQ(f.bind(f, parts, 16, 64, &store).status().message(),
            "scales: expected F16 [2, 16], got BF16 [2, 16]");
  Checkpoint bad = c;
  bad.g_idx_tensor[9] = 2;
  EXPECT_EQ(f.bind(f, bad.Parts(true), 16, 64, &store).status().message(),
            "g_idx: element 9 is 2, outside the 2 groups of the scales");
  EXPECT_EQ(f.bind(f, c.Parts(true), 12, 64, &store).status().message(),
            "[out, in] = [12, 64]: out must be a multiple of 8 and in of 32");
  const WeightFormat awq = MakeHfQuantFormat(HfQuantMethod::kAwq, 4, 64, 0);
  EXPECT_EQ(awq.bind(awq, c.Parts(false), 16, 96, &store).status().message(),
            "[out, in] = [16, 96]: out must be a multiple of 8 and in of the group size 64");
  EXPECT_EQ(store.bytes(), 0);
}

TEST(HfQuantSchemeTest, SupportedParameters) {
  EXPECT_EQ(CheckHfQuantParams(HfQuantMethod::kAwq, 4, 128), "");
  EXPECT_EQ(CheckHfQuantParams(HfQuantMethod::kGptq, 8, -1), "");
  EXPECT_EQ(CheckHfQuantParams(HfQuantMethod::kAwq, 8, 128), "AWQ bits 8 is not supported (4)");
  EXPECT_EQ(CheckHfQuantParams(HfQuantMethod::kAwq, 4, -1),
            "AWQ group_size -1 is not supported (a multiple of 32)");
  EXPECT_EQ(CheckHfQuantParams(HfQuantMethod::kGptq, 3, 128),
            "GPTQ bits 3 is not supported (4 or 8)");
  EXPECT_EQ(CheckHfQuantParams(HfQuantMethod::kGptq, 4, 16),
            "GPTQ group_size 16 is not supported (a multiple of 32, or -1)");
}

}  // namespace
}  // namespace pagellm
