// The decoding MatMul family (Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K..Q6_K, IQ4_XS) on random blocks:
// every SIMD level equals the scalar reference bit for bit, results are batch- and
// thread-invariant, and they approximate float64 math over the reference dequantization within
// the activation-rounding bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "kernels/kernels_test_util.h"
#include "kernels/matmul.h"
#include "kernels/matmul_decode_internal.h"
#include "kernels/matmul_internal.h"
#include "kernels/packed_weights.h"

namespace pagellm {
namespace {

using testing_util::AvailableLevels;
using testing_util::Dequantized;
using testing_util::OwnedWeights;
using testing_util::RandomVector;

constexpr DType kDecodeTypes[] = {DType::kQ4_1, DType::kQ5_0,  DType::kQ5_1, DType::kIQ4_NL,
                                  DType::kQ2_K, DType::kQ3_K,  DType::kQ4_K, DType::kQ5_K,
                                  DType::kQ6_K, DType::kIQ4_XS};

// Byte offsets of the fp16 fields of a block (ggml's layouts): the scale d first, a min second
// where the format has one.
std::vector<int> HalfFields(DType t) {
  switch (t) {
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
      return {0, 2};
    case DType::kQ2_K:
      return {80, 82};
    case DType::kQ3_K:
      return {108};
    case DType::kQ6_K:
      return {208};
    default:  // Q5_0, IQ4_NL, IQ4_XS
      return {0};
  }
}

// Random code and scale bytes with finite fp16 scales of about 1e-3 (mins positive).
OwnedWeights RandomBlocks(std::mt19937& rng, DType t, int64_t rows, int64_t cols) {
  OwnedWeights o;
  o.w.dtype = t;
  o.w.rows = rows;
  o.w.cols = cols;
  o.bytes.resize(static_cast<size_t>(o.w.nbytes()));
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : o.bytes) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> mag(0.2e-3f, 2e-3f);
  const std::vector<int> fields = HalfFields(t);
  const int64_t bb = DTypeBlockBytes(t);
  for (int64_t blk = 0; blk < o.w.nbytes() / bb; ++blk) {
    for (size_t f = 0; f < fields.size(); ++f) {
      const float v = f == 0 && byte(rng) < 128 ? -mag(rng) : mag(rng);
      const uint16_t h = F32ToF16(v);
      std::memcpy(o.bytes.data() + blk * bb + fields[f], &h, 2);
    }
  }
  o.w.data = o.bytes.data();
  return o;
}

std::vector<float> RunAt(SimdLevel level, const WeightMatrix& w, const std::vector<float>& x,
                         int64_t n, ThreadPool* pool) {
  std::vector<float> y(n * w.rows, -12345.0f);
  MatMulAtLevel(level, w, x.data(), n, y.data(), pool);
  return y;
}

bool SameBits(float a, float b) {
  return std::memcmp(&a, &b, 4) == 0;
}

TEST(MatMulDecodeTest, EveryLevelEqualsScalarAndIsBatchInvariant) {
  std::mt19937 rng(17);
  ThreadPool pool(3);
  for (DType t : kDecodeTypes) {
    const int64_t blk = DTypeBlockElems(t);
    for (int64_t cols : std::vector<int64_t>{blk, 2 * blk, 3 * blk, 9 * blk, 2048}) {
      if (cols % blk != 0) continue;
      const int64_t rows = 37, n = 19;
      OwnedWeights ow = RandomBlocks(rng, t, rows, cols);
      const std::vector<float> x = RandomVector(rng, n * cols);
      const std::vector<float> ref = RunAt(SimdLevel::kScalar, ow.w, x, n, nullptr);
      for (SimdLevel level : AvailableLevels()) {
        const std::vector<float> y = RunAt(level, ow.w, x, n, &pool);
        for (int64_t tok = 0; tok < n; ++tok) {
          // Token tok alone, single-threaded, must give the same bits as within the batch.
          const std::vector<float> xt(x.begin() + tok * cols, x.begin() + (tok + 1) * cols);
          const std::vector<float> y1 = RunAt(level, ow.w, xt, 1, nullptr);
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_TRUE(SameBits(y[tok * rows + r], ref[tok * rows + r]))
                << DTypeName(t) << " " << SimdLevelName(level) << " cols " << cols << " tok " << tok
                << " row " << r << ": " << y[tok * rows + r] << " vs " << ref[tok * rows + r];
            ASSERT_TRUE(SameBits(y1[r], y[tok * rows + r]))
                << DTypeName(t) << " " << SimdLevelName(level) << " batch of 1, row " << r;
          }
        }
      }
    }
  }
}

// The AVX-512 activation quantizers write the scalar references' bytes: codes rounded half
// away from zero (inputs placed exactly on ties and one ulp either side of them), scales and
// the code sums (Q8_K's 16-element sums; the 32-blocks' code-offset biases), for random, zero
// and tiny blocks.
TEST(MatMulDecodeTest, ActivationQuantizersAvx512EqualScalar) {
  if (!GetCpuFeatures().avx512) GTEST_SKIP() << "no AVX-512";
  std::mt19937 rng(29);
  const int64_t cols = 256 * 9;
  std::vector<float> x = RandomVector(rng, cols, 3.0f);
  // Super-block 1: amax 127, so codes are the inputs themselves: ties k + 0.5 and neighbours.
  std::uniform_int_distribution<int> code(-126, 126);
  for (int i = 0; i < 256; ++i) {
    const float tie = static_cast<float>(code(rng)) + 0.5f;
    x[256 + i] = i % 3 == 0 ? tie : std::nextafter(tie, i % 3 == 1 ? 1000.0f : -1000.0f);
  }
  x[256] = 127.0f;
  x[257] = -0.5f;
  x[258] = 0.5f;
  for (int i = 0; i < 256; ++i) x[512 + i] = 0.0f;                                  // all zero
  for (int i = 0; i < 256; ++i) x[768 + i] = 1e-30f * static_cast<float>(i - 128);  // tiny
  const int64_t bytes = kernels_internal::GetQ8KActsLayout(cols).bytes;
  std::vector<uint8_t> want(bytes, 0xa5), got(bytes, 0x5a);
  kernels_internal::PrepareQ8KActs(0, x.data(), cols, want.data());
  kernels_internal::avx512::PrepareQ8KActs(0, x.data(), cols, got.data());
  for (int64_t i = 0; i < bytes; ++i) {
    ASSERT_EQ(got[i], want[i]) << "Q8_K byte " << i;
  }
  const int64_t qbytes = kernels_internal::QuantActsBytes(cols);
  for (int32_t code_offset : {0, 8, 16}) {
    std::vector<uint8_t> qwant(qbytes, 0xa5), qgot(qbytes, 0x5a);
    kernels_internal::scalar::PrepareQuantActs(code_offset, x.data(), cols, qwant.data());
    kernels_internal::avx512::PrepareQuantActs(code_offset, x.data(), cols, qgot.data());
    for (int64_t i = 0; i < qbytes; ++i) {
      ASSERT_EQ(qgot[i], qwant[i]) << "32-blocks, code offset " << code_offset << ", byte " << i;
    }
  }
}

// The load-time packed copy of Q4_K / Q5_K / Q6_K / IQ4_XS (kernels/kquant_packed.h): the
// AVX-512 kernels over it equal the scalar reference bit for bit, for decode and prefill token
// counts (tails of the 4-token tiles), ragged last row groups and any thread split; each token
// alone gives its row of the batch result.
// The types with a packed copy (kquant_packed.h).
constexpr DType kPackedTypes[] = {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS};

// Each packed type, and once more with its byte-instruction path where the CPU has it: Q5_K
// with GFNI, IQ4_XS with AVX512-VBMI (the kernels unpack the codes either way;
// kernels_internal::avx512::SetKQuantByteIsaForTesting).
struct PackedVariant {
  DType type;
  bool byte_isa;
};
std::vector<PackedVariant> PackedVariants() {
  const CpuFeatures& f = GetCpuFeatures();
  std::vector<PackedVariant> v;
  for (DType t : kPackedTypes) {
    v.push_back({t, false});
    if ((t == DType::kQ5_K && f.gfni) || (t == DType::kIQ4_XS && f.avx512_vbmi)) {
      v.push_back({t, true});
    }
  }
  return v;
}

// Sets the kernels' byte-instruction switch for one variant; back on when the test ends.
class ByteIsaSwitch {
 public:
  ~ByteIsaSwitch() { kernels_internal::avx512::SetKQuantByteIsaForTesting(true); }
  void Set(bool on) { kernels_internal::avx512::SetKQuantByteIsaForTesting(on); }
};

TEST(MatMulDecodeTest, PackedKQuantEqualsScalarAndIsBatchInvariant) {
  if (!MatMulUsesPackedWeights(DType::kQ4_K)) GTEST_SKIP() << "no packed kernels on this CPU";
  std::mt19937 rng(19);
  ThreadPool pool(3);
  struct Shape {
    int64_t rows, cols;
  };
  const Shape shapes[] = {{1, 256}, {16, 512}, {37, 768}, {100, 2048}, {33, 4096}};
  ByteIsaSwitch byte_isa;
  for (const PackedVariant& variant : PackedVariants()) {
    const DType t = variant.type;
    byte_isa.Set(variant.byte_isa);
    for (const Shape& sh : shapes) {
      OwnedWeights ow = RandomBlocks(rng, t, sh.rows, sh.cols);
      PackedWeights packed;
      packed.Add(ow.w);
      const WeightMatrix& pw = packed.Get(ow.w);
      ASSERT_NE(pw.packed, nullptr) << DTypeName(t);
      for (int64_t n : {1, 2, 3, 5, 11}) {
        const std::vector<float> x = RandomVector(rng, n * sh.cols);
        const std::vector<float> ref = RunAt(SimdLevel::kScalar, ow.w, x, n, nullptr);
        const std::vector<float> y1 = RunAt(SimdLevel::kAvx512, pw, x, n, nullptr);
        const std::vector<float> y2 = RunAt(SimdLevel::kAvx512, pw, x, n, &pool);
        for (int64_t i = 0; i < n * sh.rows; ++i) {
          ASSERT_TRUE(SameBits(y1[i], ref[i]) && SameBits(y2[i], ref[i]))
              << DTypeName(t) << (variant.byte_isa ? " byte-isa " : " ") << sh.rows << "x"
              << sh.cols << " n " << n << " at " << i << ": " << y1[i] << " / " << y2[i] << " vs "
              << ref[i];
        }
        for (int64_t tok = 0; tok < n; tok += 2) {
          const std::vector<float> xt(x.begin() + tok * sh.cols, x.begin() + (tok + 1) * sh.cols);
          const std::vector<float> yt = RunAt(SimdLevel::kAvx512, pw, xt, 1, &pool);
          for (int64_t r = 0; r < sh.rows; ++r) {
            ASSERT_TRUE(SameBits(yt[r], ref[tok * sh.rows + r]))
                << DTypeName(t) << " token " << tok << " alone, row " << r;
          }
        }
      }
    }
  }
}

// The packed kernels' integer sums at their bounds: every code byte 0xff or 0x80 (the largest
// codes, Q4_K / Q5_K's largest scales and mins, Q6_K's most negative scale), every activation at
// +-127 after quantization, in one sign or alternating every 16 elements. Q4_K, Q5_K and Q6_K
// multiply partial sums by their scales as int16 (|sum| <= 16 * 15 * 127, 8 * 31 * 127 and
// 4 * 63 * 127 must fit): a variant that lets a sum overflow int16 fails here, while random
// codes rarely reach the bound.
TEST(MatMulDecodeTest, PackedKQuantExactAtTheLargestCodesAndActivations) {
  if (!MatMulUsesPackedWeights(DType::kQ4_K)) GTEST_SKIP() << "no packed kernels on this CPU";
  const int64_t rows = 20, cols = 512;
  ByteIsaSwitch byte_isa;
  for (const PackedVariant& variant : PackedVariants()) {
    const DType t = variant.type;
    byte_isa.Set(variant.byte_isa);
    for (const uint8_t fill : {uint8_t{0xff}, uint8_t{0x80}}) {
      OwnedWeights ow;
      ow.w.dtype = t;
      ow.w.rows = rows;
      ow.w.cols = cols;
      ow.bytes.assign(static_cast<size_t>(ow.w.nbytes()), fill);
      const int64_t bb = DTypeBlockBytes(t);
      const uint16_t d = F32ToF16(1e-3f);
      for (int64_t blk = 0; blk < ow.w.nbytes() / bb; ++blk) {
        for (int f : HalfFields(t)) std::memcpy(ow.bytes.data() + blk * bb + f, &d, 2);
      }
      ow.w.data = ow.bytes.data();
      PackedWeights packed;
      packed.Add(ow.w);
      const WeightMatrix& pw = packed.Get(ow.w);
      ASSERT_NE(pw.packed, nullptr) << DTypeName(t);
      // Token i takes pattern (first + i) % 3; one token and tiles of several take different
      // paths through the kernel.
      for (int64_t n : {1, 4, 5}) {
        for (int first = 0; first < 3; ++first) {
          std::vector<float> x(static_cast<size_t>(n * cols));
          for (int64_t i = 0; i < n; ++i) {
            const int pattern = static_cast<int>((first + i) % 3);
            for (int64_t j = 0; j < cols; ++j) {
              x[i * cols + j] = pattern == 0   ? 1.0f
                                : pattern == 1 ? -1.0f
                                               : (j / 16 % 2 == 0 ? 1.0f : -1.0f);
            }
          }
          const std::vector<float> ref = RunAt(SimdLevel::kScalar, ow.w, x, n, nullptr);
          const std::vector<float> y = RunAt(SimdLevel::kAvx512, pw, x, n, nullptr);
          for (int64_t i = 0; i < n * rows; ++i) {
            ASSERT_TRUE(SameBits(y[i], ref[i]))
                << DTypeName(t) << (variant.byte_isa ? " byte-isa" : "") << " fill " << int{fill}
                << " n " << n << " first pattern " << first << " at " << i << ": " << y[i] << " vs "
                << ref[i];
          }
        }
      }
    }
  }
}

// One MatMulMany over matrices of different dtypes (llama.cpp's Q4_K_M mixes Q4_K and Q6_K in a
// layer's q/k/v; with Q8_0, F16 and Q4_0 every activation layout is there: Q8_K, Q8 blocks of
// 32 with distinct code offsets, floats) writes bitwise what one MatMul per matrix writes, at
// every level, packed or not, with and without a pool, for decode and prefill token counts.
TEST(MatMulDecodeTest, ManyOfMixedDtypesMatchesSeparateCalls) {
  std::mt19937 rng(23);
  ThreadPool pool(2);
  const int64_t cols = 512;
  const std::vector<std::vector<DType>> mixes = {
      {DType::kQ4_K, DType::kQ4_K, DType::kQ6_K},
      {DType::kQ6_K, DType::kIQ4_XS, DType::kQ5_K, DType::kQ4_K},
      {DType::kQ4_K, DType::kQ8_0, DType::kF16, DType::kQ4_0},
      {DType::kQ4_1, DType::kQ4_0, DType::kQ5_0}};
  for (const std::vector<DType>& mix : mixes) {
    std::vector<OwnedWeights> owned;
    const int64_t rows[] = {130, 32, 17, 64};
    for (size_t i = 0; i < mix.size(); ++i) {
      // QuantizeRow writes F16 / Q8_0 / Q4_0; the decode formats get random blocks.
      const bool quantizable =
          mix[i] == DType::kF16 || mix[i] == DType::kQ8_0 || mix[i] == DType::kQ4_0;
      owned.push_back(quantizable ? testing_util::RandomWeights(rng, mix[i], rows[i], cols)
                                  : RandomBlocks(rng, mix[i], rows[i], cols));
    }
    PackedWeights packed;
    for (const OwnedWeights& o : owned) packed.Add(o.w);
    for (int64_t n : {1, 3, 20}) {
      const std::vector<float> x = RandomVector(rng, n * cols);
      for (SimdLevel level : AvailableLevels()) {
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<std::vector<float>> ys(mix.size());
          std::vector<MatMulOutput> outs;
          for (size_t i = 0; i < mix.size(); ++i) {
            ys[i].assign(n * rows[i], -12345.0f);
            outs.push_back({&packed.Get(owned[i].w), ys[i].data()});
          }
          if (outs.size() == 3) {
            MatMulManyAtLevel(level, {outs[0], outs[1], outs[2]}, x.data(), n, p);
          } else {
            MatMulManyAtLevel(level, {outs[0], outs[1], outs[2], outs[3]}, x.data(), n, p);
          }
          for (size_t i = 0; i < mix.size(); ++i) {
            const std::vector<float> ref = RunAt(level, packed.Get(owned[i].w), x, n, nullptr);
            for (int64_t j = 0; j < n * rows[i]; ++j) {
              ASSERT_TRUE(SameBits(ys[i][j], ref[j]))
                  << DTypeName(mix[i]) << " (matrix " << i << ") " << SimdLevelName(level) << " n "
                  << n << " at " << j << ": " << ys[i][j] << " vs " << ref[j];
            }
          }
        }
      }
    }
  }
}

// Against float64 math over the reference dequantization and the unquantized activations:
// rounding each activation block (32 or 256 elements) moves x by at most d_x / 2, so
// |err| <= sum over blocks of d_x / 2 * sum |w| (2% slack) plus fp32 accumulation.
TEST(MatMulDecodeTest, CloseToDequantizedFloat64) {
  std::mt19937 rng(18);
  for (DType t : kDecodeTypes) {
    const int64_t rows = 23, cols = 1024, n = 3;
    const int64_t ablk = DTypeBlockElems(t) == 256 ? 256 : 32;
    OwnedWeights ow = RandomBlocks(rng, t, rows, cols);
    const std::vector<float> wf = Dequantized(ow.w);
    const std::vector<float> x = RandomVector(rng, n * cols);
    for (SimdLevel level : AvailableLevels()) {
      const std::vector<float> y = RunAt(level, ow.w, x, n, nullptr);
      for (int64_t tok = 0; tok < n; ++tok) {
        for (int64_t r = 0; r < rows; ++r) {
          double exact = 0.0, bound = 0.0, mag = 0.0;
          for (int64_t b = 0; b < cols / ablk; ++b) {
            double amax = 0.0, wsum = 0.0;
            for (int64_t i = 0; i < ablk; ++i) {
              const int64_t k = ablk * b + i;
              const double p = static_cast<double>(wf[r * cols + k]) * x[tok * cols + k];
              exact += p;
              mag += std::fabs(p);
              amax = std::max(amax, std::fabs(static_cast<double>(x[tok * cols + k])));
              wsum += std::fabs(wf[r * cols + k]);
            }
            bound += amax / 127.0 / 2.0 * 1.02 * wsum;
          }
          EXPECT_NEAR(y[tok * rows + r], exact, bound + 1e-5 * mag)
              << DTypeName(t) << " " << SimdLevelName(level) << " row " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace pagellm
