#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/half.h"
#include "base/huge_page_buffer.h"
#include "kernels/kernels_test_util.h"
#include "kernels/matmul_internal.h"
#include "kernels/packed_weights.h"
#include "kernels/weight_format.h"

namespace pagellm {
namespace {

using testing_util::AvailableLevels;
using testing_util::Dequantized;
using testing_util::OwnedWeights;
using testing_util::RandomVector;
using testing_util::RandomWeights;

constexpr DType kAllTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16,   DType::kQ8_0,
                               DType::kQ4_0, DType::kQ4_Z, DType::kQ4_Z128};
constexpr DType kQuantTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_Z, DType::kQ4_Z128};

bool IsQuant(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ4_Z || t == DType::kQ4_Z128;
}

// Whether rows of `cols` are whole blocks of t (quantized types: 32; Q4_Z128: 128).
bool Fits(DType t, int64_t cols) {
  return cols % (IsQuant(t) ? DTypeBlockElems(t) : 1) == 0;
}
// cols rounded up to whole blocks of t (tests with one fixed width).
int64_t ColsFor(DType t, int64_t cols) {
  const int64_t b = DTypeBlockElems(t);
  return (cols + b - 1) / b * b;
}

std::string Name(SimdLevel level, DType t, int64_t rows, int64_t cols, int64_t n) {
  return std::string(SimdLevelName(level)) + " " + std::string(DTypeName(t)) + " " +
         std::to_string(rows) + "x" + std::to_string(cols) + " n=" + std::to_string(n);
}

// Signed quantized weight values and per-32 scales of one row (Q8_0 / Q4_0 / Q4_Z / Q4_Z128),
// from the formats' definitions: d * q, d * (u - 8), d * (u - z).
void DecodeQuantRow(const WeightMatrix& w, int64_t r, std::vector<int>* q, std::vector<float>* d) {
  const int64_t nb = w.cols / 32;
  q->assign(w.cols, 0);
  d->assign(nb, 0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    if (w.dtype == DType::kQ8_0) {
      const auto& blk = reinterpret_cast<const BlockQ8_0*>(w.row(r))[b];
      (*d)[b] = F16ToF32(blk.d);
      for (int i = 0; i < 32; ++i) (*q)[32 * b + i] = blk.qs[i];
    } else if (w.dtype == DType::kQ4_Z) {
      BlockQ4_Z blk;
      std::memcpy(&blk, w.row(r) + b * sizeof(BlockQ4_Z), sizeof(blk));
      (*d)[b] = F16ToF32(blk.d);
      for (int i = 0; i < 16; ++i) {
        (*q)[32 * b + i] = (blk.qs[i] & 15) - blk.z;
        (*q)[32 * b + i + 16] = (blk.qs[i] >> 4) - blk.z;
      }
    } else if (w.dtype == DType::kQ4_Z128) {
      BlockQ4_Z128 blk;
      std::memcpy(&blk, w.row(r) + b / 4 * sizeof(BlockQ4_Z128), sizeof(blk));
      (*d)[b] = F16ToF32(blk.d);
      const uint8_t* qs = blk.qs + 16 * (b % 4);
      for (int i = 0; i < 16; ++i) {
        (*q)[32 * b + i] = (qs[i] & 15) - blk.z;
        (*q)[32 * b + i + 16] = (qs[i] >> 4) - blk.z;
      }
    } else {
      const auto& blk = reinterpret_cast<const BlockQ4_0*>(w.row(r))[b];
      (*d)[b] = F16ToF32(blk.d);
      for (int i = 0; i < 16; ++i) {
        (*q)[32 * b + i] = (blk.qs[i] & 15) - 8;
        (*q)[32 * b + i + 16] = (blk.qs[i] >> 4) - 8;
      }
    }
  }
}

// Float64 reference of the kernels' own arithmetic scheme, and the sum of |terms| that bounds
// fp32 rounding. Float weights: sum W*x. Quantized: sum_b d_w * d_x * isum_b with activations
// quantized by the reference QuantizeActBlock.
void SchemeReference(const WeightMatrix& w, const std::vector<float>& x, int64_t n,
                     std::vector<double>* ref, std::vector<double>* mag) {
  ref->assign(n * w.rows, 0.0);
  mag->assign(n * w.rows, 0.0);
  if (!IsQuant(w.dtype)) {
    const std::vector<float> wf = Dequantized(w);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t r = 0; r < w.rows; ++r) {
        double s = 0.0, m = 0.0;
        for (int64_t i = 0; i < w.cols; ++i) {
          const double p = static_cast<double>(wf[r * w.cols + i]) * x[t * w.cols + i];
          s += p;
          m += std::fabs(p);
        }
        (*ref)[t * w.rows + r] = s;
        (*mag)[t * w.rows + r] = m;
      }
    }
    return;
  }
  const int64_t nb = w.cols / 32;
  std::vector<int8_t> xq(n * w.cols);
  std::vector<float> xd(n * nb);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t b = 0; b < nb; ++b) {
      kernels_internal::QuantizeActBlock(&x[t * w.cols + 32 * b], &xq[t * w.cols + 32 * b],
                                         &xd[t * nb + b]);
    }
  }
  std::vector<int> q;
  std::vector<float> d;
  for (int64_t r = 0; r < w.rows; ++r) {
    DecodeQuantRow(w, r, &q, &d);
    for (int64_t t = 0; t < n; ++t) {
      double s = 0.0, m = 0.0;
      for (int64_t b = 0; b < nb; ++b) {
        int64_t isum = 0, iabs = 0;
        for (int i = 0; i < 32; ++i) {
          const int p = q[32 * b + i] * xq[t * w.cols + 32 * b + i];
          isum += p;
          iabs += std::abs(p);
        }
        const double scale = static_cast<double>(d[b]) * xd[t * nb + b];
        s += scale * static_cast<double>(isum);
        // Bounds every partial (lane) sum, which may exceed |isum| through cancellation.
        m += std::fabs(scale) * static_cast<double>(iabs);
      }
      (*ref)[t * w.rows + r] = s;
      (*mag)[t * w.rows + r] = m;
    }
  }
}

// x with every value rounded to bf16 (RNE), as the AVX512-BF16 kernels see it.
std::vector<float> RoundedToBf16(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = Bf16ToF32(F32ToBf16(x[i]));
  return r;
}

bool UsesBf16Activations(SimdLevel level, DType t) {
  return t == DType::kBF16 && level == SimdLevel::kAvx512 && GetCpuFeatures().avx512_bf16;
}

std::vector<float> RunMatMul(SimdLevel level, const WeightMatrix& w, const std::vector<float>& x,
                             int64_t n, ThreadPool* pool) {
  std::vector<float> y(n * w.rows, -12345.0f);
  MatMulAtLevel(level, w, x.data(), n, y.data(), pool);
  return y;
}

TEST(MatMulTest, MatchesSchemeReferenceAtEveryLevel) {
  std::mt19937 rng(1);
  ThreadPool pool(2);
  struct Shape {
    int64_t rows, cols, n;
  };
  const Shape shapes[] = {{1, 32, 1},   {3, 64, 2},    {7, 96, 5},    {13, 160, 7}, {33, 32, 13},
                          {5, 2048, 3}, {9, 4096, 1},  {17, 288, 67}, {6, 33, 4},   {11, 1000, 9},
                          {4, 15, 37},  {69, 544, 11}, {19, 384, 21}, {3, 128, 2}};
  for (const Shape& s : shapes) {
    for (DType t : kAllTypes) {
      if (!Fits(t, s.cols)) continue;
      OwnedWeights ow = RandomWeights(rng, t, s.rows, s.cols);
      const std::vector<float> x = RandomVector(rng, s.n * s.cols);
      std::vector<double> ref_all, mag_all, ref_bf16x, mag_bf16x;
      SchemeReference(ow.w, x, s.n, &ref_all, &mag_all);
      SchemeReference(ow.w, RoundedToBf16(x), s.n, &ref_bf16x, &mag_bf16x);
      std::vector<float> quant_first;
      for (SimdLevel level : AvailableLevels()) {
        SCOPED_TRACE(Name(level, t, s.rows, s.cols, s.n));
        const std::vector<float> y = RunMatMul(level, ow.w, x, s.n, &pool);
        // The AVX512-BF16 dot-product kernel rounds activations to bf16 first.
        const bool bf16x = UsesBf16Activations(level, t);
        const std::vector<double>& ref = bf16x ? ref_bf16x : ref_all;
        const std::vector<double>& mag = bf16x ? mag_bf16x : mag_all;
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_TRUE(std::isfinite(y[i])) << i;
          // fp32 accumulation: error <= (lanes' depth + tree) * 2^-24 * sum|terms|.
          ASSERT_NEAR(y[i], ref[i], 1e-5 * mag[i] + 1e-30) << "output " << i;
        }
        // Quantized results are bitwise identical across levels (shared lane scheme).
        if (IsQuant(t)) {
          if (quant_first.empty()) {
            quant_first = y;
          } else {
            ASSERT_EQ(0, std::memcmp(y.data(), quant_first.data(), y.size() * sizeof(float)));
          }
        }
      }
    }
  }
}

// Quantized kernels vs float64 math on the dequantized weights and the unquantized
// activations. Activation rounding moves each x by at most d_x / 2 (plus fp32 slop), so
// |err| <= sum_b d_x,b / 2 * sum_i |w_bi| (with 2% slack) + fp32 accumulation.
TEST(MatMulTest, QuantizedCloseToDequantizedFloat64) {
  std::mt19937 rng(2);
  for (DType t : kQuantTypes) {
    const int64_t rows = 37, cols = 1024, n = 5;
    OwnedWeights ow = RandomWeights(rng, t, rows, cols);
    const std::vector<float> wf = Dequantized(ow.w);
    const std::vector<float> x = RandomVector(rng, n * cols);
    for (SimdLevel level : AvailableLevels()) {
      const std::vector<float> y = RunMatMul(level, ow.w, x, n, nullptr);
      for (int64_t tok = 0; tok < n; ++tok) {
        for (int64_t r = 0; r < rows; ++r) {
          double exact = 0.0, bound = 0.0, mag = 0.0;
          for (int64_t b = 0; b < cols / 32; ++b) {
            double amax = 0.0, wsum = 0.0;
            for (int i = 0; i < 32; ++i) {
              const int64_t k = 32 * b + i;
              const double p = static_cast<double>(wf[r * cols + k]) * x[tok * cols + k];
              exact += p;
              mag += std::fabs(p);
              amax = std::max(amax, std::fabs(static_cast<double>(x[tok * cols + k])));
              wsum += std::fabs(wf[r * cols + k]);
            }
            bound += amax / 127.0 / 2.0 * 1.02 * wsum;
          }
          EXPECT_NEAR(y[tok * rows + r], exact, bound + 1e-5 * mag)
              << SimdLevelName(level) << " " << DTypeName(t);
        }
      }
    }
  }
}

// Power-of-two scales and small integers make every fp32 operation exact, so the kernels must
// reproduce the integer dot products exactly: y == the float64 reference, bit for bit.
TEST(MatMulTest, QuantizedIntegerDotProductsExact) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(-5, 5), nib(0, 15), q8(-128, 127), zero(0, 16);
  for (DType t : kQuantTypes) {
    for (int64_t cols : {32, 64, 96, 128, 2048}) {
      if (!Fits(t, cols)) continue;
      const int64_t rows = 9, n = 6, nb = cols / 32;
      OwnedWeights ow;
      ow.w.dtype = t;
      ow.w.rows = rows;
      ow.w.cols = cols;
      ow.bytes.resize(ow.w.nbytes());
      ow.w.data = ow.bytes.data();
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t b = 0; b < nb; ++b) {
          if (t == DType::kQ8_0) {
            auto* blk = reinterpret_cast<BlockQ8_0*>(ow.bytes.data() + r * ow.w.row_bytes()) + b;
            blk->d = F32ToF16(0.125f);
            for (int i = 0; i < 32; ++i) blk->qs[i] = static_cast<int8_t>(q8(rng) / 16);
          } else if (t == DType::kQ4_Z128) {
            if (b % 4 != 0) continue;  // one stored block per 4 blocks of 32
            BlockQ4_Z128 blk;
            blk.d = F32ToF16(0.25f);
            blk.z = static_cast<uint8_t>(zero(rng));
            for (int i = 0; i < 64; ++i) blk.qs[i] = static_cast<uint8_t>(nib(rng) | nib(rng) << 4);
            std::memcpy(ow.bytes.data() + r * ow.w.row_bytes() + b / 4 * sizeof(blk), &blk,
                        sizeof(blk));
          } else if (t == DType::kQ4_Z) {
            // Zero points over [0, 16]: GPTQ's v1 convention makes 16.
            BlockQ4_Z blk;
            blk.d = F32ToF16(0.25f);
            blk.z = static_cast<uint8_t>(zero(rng));
            for (int i = 0; i < 16; ++i) blk.qs[i] = static_cast<uint8_t>(nib(rng) | nib(rng) << 4);
            std::memcpy(ow.bytes.data() + r * ow.w.row_bytes() + b * sizeof(blk), &blk,
                        sizeof(blk));
          } else {
            auto* blk = reinterpret_cast<BlockQ4_0*>(ow.bytes.data() + r * ow.w.row_bytes()) + b;
            blk->d = F32ToF16(0.25f);
            for (int i = 0; i < 16; ++i)
              blk->qs[i] = static_cast<uint8_t>(nib(rng) | nib(rng) << 4);
          }
        }
      }
      // Each activation block: one element of +-127/16 (so d_x = 1/16 exactly), rest k/16.
      std::vector<float> x(n * cols);
      for (int64_t i = 0; i < n * cols; ++i) x[i] = small(rng) / 16.0f;
      for (int64_t i = 0; i < n * nb; ++i) x[32 * i + (i % 32)] = (i % 2 ? 127.0f : -127.0f) / 16;
      std::vector<double> ref, mag;
      SchemeReference(ow.w, x, n, &ref, &mag);
      for (SimdLevel level : AvailableLevels()) {
        const std::vector<float> y = RunMatMul(level, ow.w, x, n, nullptr);
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_EQ(static_cast<double>(y[i]), ref[i])
              << SimdLevelName(level) << " " << DTypeName(t) << " cols " << cols << " i " << i;
        }
      }
    }
  }
}

// y[t][o] must not depend on n_tokens, on the other tokens, on the thread count or on the row
// split: compare bit patterns against a single-threaded run of the whole batch. (One pool at a
// time: idle pools spin, which on a 2-core machine would only slow the test down.)
TEST(MatMulTest, BatchAndThreadInvariant) {
  const int64_t rows = 67, n = 37;
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    // 1000: a k tail (cols % 16 != 0) in the float kernels' last chunk.
    for (int64_t cols : {96, 1000, 2048}) {
      for (DType t : kAllTypes) {
        if (!Fits(t, cols)) continue;
        std::mt19937 rng(static_cast<unsigned>(cols * 10 + static_cast<int>(t)));
        OwnedWeights ow = RandomWeights(rng, t, rows, cols);
        const std::vector<float> x = RandomVector(rng, n * cols);
        for (SimdLevel level : AvailableLevels()) {
          if (level == SimdLevel::kScalar && cols > 96) continue;  // slow; same code path
          SCOPED_TRACE(Name(level, t, rows, cols, n) + " threads " + std::to_string(threads));
          const std::vector<float> full = RunMatMul(level, ow.w, x, n, nullptr);
          const std::vector<float> pooled = RunMatMul(level, ow.w, x, n, &pool);
          ASSERT_EQ(0, std::memcmp(full.data(), pooled.data(), full.size() * sizeof(float)));
          // With 3 threads on a 2-core machine every dispatch waits for a time slice, so only
          // the row-split checks above and below run there.
          const bool all_checks = threads == 2;
          // One token at a time.
          for (int64_t tok = 0; all_checks && tok < n; ++tok) {
            const std::vector<float> xt(x.begin() + tok * cols, x.begin() + (tok + 1) * cols);
            const std::vector<float> y1 = RunMatMul(level, ow.w, xt, 1, tok % 2 ? &pool : nullptr);
            ASSERT_EQ(0, std::memcmp(y1.data(), &full[tok * rows], rows * sizeof(float))) << tok;
          }
          // Sub-batches at odd offsets (different token-tile alignment).
          for (int64_t b : {1, 5, 11}) {
            for (int64_t len : {2, 7, 19}) {
              if (!all_checks) continue;
              const std::vector<float> xs(x.begin() + b * cols, x.begin() + (b + len) * cols);
              const std::vector<float> ys = RunMatMul(level, ow.w, xs, len, &pool);
              ASSERT_EQ(0, std::memcmp(ys.data(), &full[b * rows], len * rows * sizeof(float)));
            }
          }
          // A different row split: a submatrix view starting at an odd row.
          WeightMatrix sub = ow.w;
          sub.rows = rows - 3;
          sub.data = ow.w.row(3);
          const std::vector<float> ysub = RunMatMul(level, sub, x, n, &pool);
          for (int64_t tok = 0; tok < n; ++tok) {
            ASSERT_EQ(0, std::memcmp(&ysub[tok * sub.rows], &full[tok * rows + 3],
                                     sub.rows * sizeof(float)));
          }
        }
      }
    }
  }
}

// n random tokens through the packed matrix pw at the AVX-512 level, without and with a pool,
// equal bit for bit to the original w at ref_level; each token alone (every third) gives its
// row of the batch result.
void ExpectPackedMatches(std::mt19937& rng, SimdLevel ref_level, const WeightMatrix& w,
                         const WeightMatrix& pw, int64_t n, ThreadPool* pool) {
  const std::vector<float> x = RandomVector(rng, n * w.cols);
  const std::vector<float> ref = RunMatMul(ref_level, w, x, n, nullptr);
  const std::vector<float> y1 = RunMatMul(SimdLevel::kAvx512, pw, x, n, nullptr);
  const std::vector<float> y2 = RunMatMul(SimdLevel::kAvx512, pw, x, n, pool);
  ASSERT_EQ(0, std::memcmp(ref.data(), y1.data(), ref.size() * sizeof(float)));
  ASSERT_EQ(0, std::memcmp(ref.data(), y2.data(), ref.size() * sizeof(float)));
  for (int64_t tok = 0; tok < n; tok += 3) {
    const std::vector<float> xt(x.begin() + tok * w.cols, x.begin() + (tok + 1) * w.cols);
    const std::vector<float> yt = RunMatMul(SimdLevel::kAvx512, pw, xt, 1, pool);
    ASSERT_EQ(0, std::memcmp(yt.data(), ref.data() + tok * w.rows, w.rows * sizeof(float)));
  }
}

// Weights packed at load time (kernels/packed_weights.h) give the unpacked kernels' results
// bit for bit, for every token count (decode and panel paths), ragged last groups, odd block
// counts, and any thread split; matrices the kernels do not pack come back as a plain copy
// of the same bytes on huge pages (unchanged with PAGELLM_HUGE_PAGES=0).
TEST(MatMulTest, PackedWeightsBitwiseIdentical) {
  if (!MatMulUsesPackedWeights(DType::kQ8_0)) GTEST_SKIP() << "no packed kernels on this CPU";
  ASSERT_TRUE(MatMulUsesPackedWeights(DType::kQ4_Z));
  ASSERT_TRUE(MatMulUsesPackedWeights(DType::kQ4_Z128));
  std::mt19937 rng(9);
  ThreadPool pool(2);
  struct Shape {
    int64_t rows, cols;
  };
  const Shape shapes[] = {{1, 32},    {16, 64},   {17, 96},  {40, 288},
                          {130, 544}, {64, 2048}, {200, 32}, {33, 384}};
  const int64_t token_counts[] = {1, 2, 3, 4, 5, 8, 13, 37};
  for (const Shape& s : shapes) {
    for (DType t : kQuantTypes) {
      if (!Fits(t, s.cols)) continue;
      OwnedWeights ow = RandomWeights(rng, t, s.rows, s.cols);
      PackedWeights packed;
      packed.Add(ow.w);
      const WeightMatrix& pw = packed.Get(ow.w);
      ASSERT_NE(pw.packed, nullptr);
      ASSERT_EQ(pw.data, ow.w.data);
      for (int64_t n : token_counts) {
        SCOPED_TRACE(Name(SimdLevel::kAvx512, t, s.rows, s.cols, n));
        ExpectPackedMatches(rng, SimdLevel::kScalar, ow.w, pw, n, &pool);
        if (HasFatalFailure()) return;
      }
    }
  }
  // Types without a packed layout get a plain copy on huge pages.
  OwnedWeights f = RandomWeights(rng, DType::kBF16, 40, 96);
  PackedWeights copies;
  copies.Add(f.w);
  const WeightMatrix& fw = copies.Get(f.w);
  EXPECT_EQ(fw.packed, nullptr);
  if (!HugePagesEnabled()) {
    EXPECT_EQ(&fw, &f.w);
    EXPECT_EQ(copies.bytes(), 0);
    return;
  }
  ASSERT_NE(fw.data, f.w.data);
  EXPECT_EQ(copies.bytes(), f.w.nbytes());
  ASSERT_EQ(0, std::memcmp(fw.data, f.w.data, static_cast<size_t>(f.w.nbytes())));
  const std::vector<float> x = RandomVector(rng, 5 * f.w.cols);
  const std::vector<float> ref = RunMatMul(SimdLevel::kAvx512, f.w, x, 5, &pool);
  const std::vector<float> y = RunMatMul(SimdLevel::kAvx512, fw, x, 5, &pool);
  ASSERT_EQ(0, std::memcmp(ref.data(), y.data(), ref.size() * sizeof(float)));
}

// One AddAll() lays every copy out in one arena, in the order given, each at a 64-byte offset
// right after the previous one; a tied repeat and empty matrices take no space; each copy's
// MatMul equals that of a copy made alone, bit for bit.
TEST(MatMulTest, PackedWeightsShareOneArenaInOrder) {
  std::mt19937 rng(23);
  ThreadPool pool(2);
  std::vector<OwnedWeights> owned;
  owned.push_back(RandomWeights(rng, DType::kQ4_K, 40, 512));
  owned.push_back(RandomWeights(rng, DType::kQ8_0, 17, 96));
  owned.push_back(RandomWeights(rng, DType::kQ6_K, 33, 256));
  owned.push_back(RandomWeights(rng, DType::kF16, 5, 100));
  owned.push_back(RandomWeights(rng, DType::kBF16, 3, 64));
  owned.push_back(RandomWeights(rng, DType::kQ4_0, 64, 2048));
  const WeightMatrix empty;
  std::vector<const WeightMatrix*> order;
  for (const OwnedWeights& o : owned) order.push_back(&o.w);
  order.insert(order.begin() + 2, &empty);
  order.push_back(&owned[0].w);  // tied: shares the first copy
  PackedWeights arena;
  arena.AddAll(order, &pool);
  const uint8_t* prev_end = nullptr;
  int64_t bytes = 0;
  for (const OwnedWeights& o : owned) {
    const WeightMatrix& c = arena.Get(o.w);
    const uint8_t* p = c.packed != nullptr ? c.packed : c.data;
    const bool copied = c.packed != nullptr || c.data != o.w.data;
    if (!copied) continue;  // no packed layout here and PAGELLM_HUGE_PAGES=0
    const WeightFormat& f = GetWeightFormat(o.w.dtype);
    const int64_t n = c.packed != nullptr ? f.packed_bytes(o.w.rows, o.w.cols) : o.w.nbytes();
    SCOPED_TRACE(DTypeName(o.w.dtype));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    if (prev_end != nullptr) {
      EXPECT_EQ(p, prev_end);
    }
    prev_end = p + (n + 63) / 64 * 64;
    bytes += n;
    PackedWeights alone;
    alone.Add(o.w);
    const std::vector<float> x = RandomVector(rng, 3 * o.w.cols);
    const std::vector<float> want = RunMatMul(ActiveSimdLevel(), alone.Get(o.w), x, 3, &pool);
    const std::vector<float> got = RunMatMul(ActiveSimdLevel(), c, x, 3, &pool);
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
  }
  EXPECT_EQ(arena.bytes(), bytes);
  // Adding them again copies nothing more.
  arena.AddAll(order, &pool);
  EXPECT_EQ(arena.bytes(), bytes);
}

// F16 weights in the lane layout (16 rows in the lanes) give the row-major AVX-512 kernels'
// results bit for bit: decode (1-4 tokens, every residue-pass width), prefill, cols that are
// not a multiple of 16 or of the 512 chunk, ragged last groups, any thread split; each token
// alone equals its row of the batch.
TEST(MatMulTest, F16LaneLayoutBitwiseIdentical) {
  if (!MatMulUsesPackedWeights(DType::kF16)) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(21);
  ThreadPool pool(2);
  struct Shape {
    int64_t rows, cols;
  };
  const Shape shapes[] = {{1, 16},    {16, 64},   {17, 100}, {40, 288}, {130, 544},
                          {33, 1000}, {64, 2048}, {200, 37}, {48, 1536}};
  const int64_t token_counts[] = {1, 2, 3, 4, 5, 13, 37};
  for (const Shape& s : shapes) {
    OwnedWeights ow = RandomWeights(rng, DType::kF16, s.rows, s.cols);
    PackedWeights packed;
    packed.Add(ow.w);
    const WeightMatrix& pw = packed.Get(ow.w);
    ASSERT_NE(pw.packed, nullptr);
    for (int64_t n : token_counts) {
      SCOPED_TRACE(Name(SimdLevel::kAvx512, DType::kF16, s.rows, s.cols, n));
      ExpectPackedMatches(rng, SimdLevel::kAvx512, ow.w, pw, n, &pool);
      if (HasFatalFailure()) return;
    }
  }
}

// The BF16 rows-in-lanes prefill (matmul_bf16_lanes_avx512.cc) gives the decode order's
// results bit for bit: every token of a batch equals the token alone (decode, 1 token) and
// sub-batches at odd offsets, for row counts past one 512-row panel and ragged 32-row groups,
// cols past one chunk and not a multiple of 32, with and without a pool.
TEST(MatMulTest, Bf16LanePrefillMatchesDecodeBitwise) {
  if (!UsesBf16Activations(SimdLevel::kAvx512, DType::kBF16)) {
    GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  }
  std::mt19937 rng(23);
  ThreadPool pool(2);
  struct Shape {
    int64_t rows, cols;
  };
  const Shape shapes[] = {{1, 32}, {45, 100}, {1100, 1000}, {70, 2048}, {530, 8}};
  for (const Shape& s : shapes) {
    OwnedWeights ow = RandomWeights(rng, DType::kBF16, s.rows, s.cols);
    const int64_t n = 29;
    const std::vector<float> x = RandomVector(rng, n * s.cols);
    const std::vector<float> full = RunMatMul(SimdLevel::kAvx512, ow.w, x, n, nullptr);
    const std::vector<float> pooled = RunMatMul(SimdLevel::kAvx512, ow.w, x, n, &pool);
    SCOPED_TRACE(Name(SimdLevel::kAvx512, DType::kBF16, s.rows, s.cols, n));
    ASSERT_EQ(0, std::memcmp(full.data(), pooled.data(), full.size() * sizeof(float)));
    for (int64_t tok = 0; tok < n; ++tok) {
      const std::vector<float> xt(x.begin() + tok * s.cols, x.begin() + (tok + 1) * s.cols);
      const std::vector<float> y1 = RunMatMul(SimdLevel::kAvx512, ow.w, xt, 1, nullptr);
      ASSERT_EQ(0, std::memcmp(y1.data(), &full[tok * s.rows], s.rows * sizeof(float))) << tok;
    }
    for (int64_t b : {3, 10}) {
      const int64_t len = 13;
      const std::vector<float> xs(x.begin() + b * s.cols, x.begin() + (b + len) * s.cols);
      const std::vector<float> ys = RunMatMul(SimdLevel::kAvx512, ow.w, xs, len, &pool);
      ASSERT_EQ(0, std::memcmp(ys.data(), &full[b * s.rows], len * s.rows * sizeof(float)));
    }
  }
}

// MatMulMany (several matrices, one dispatch, activations prepared once) writes bitwise what
// separate MatMul calls write, packed or not, at every level, with and without a pool.
TEST(MatMulTest, ManyMatchesSeparateCalls) {
  std::mt19937 rng(10);
  ThreadPool pool(2);
  for (DType t : kAllTypes) {
    for (int64_t n : {1, 3, 9}) {
      const int64_t cols = ColsFor(t, 96);
      OwnedWeights a = RandomWeights(rng, t, 200, cols);
      OwnedWeights b = RandomWeights(rng, t, 40, cols);
      OwnedWeights c = RandomWeights(rng, t, 17, cols);
      PackedWeights packed;
      for (const OwnedWeights* o : {&a, &b, &c}) packed.Add(o->w);
      const std::vector<float> x = RandomVector(rng, n * cols);
      for (SimdLevel level : AvailableLevels()) {
        SCOPED_TRACE(Name(level, t, 200, cols, n));
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<float> ya(n * 200), yb(n * 40), yc(n * 17);
          MatMulManyAtLevel(level,
                            {{&packed.Get(a.w), ya.data()},
                             {&packed.Get(b.w), yb.data()},
                             {&packed.Get(c.w), yc.data()}},
                            x.data(), n, p);
          EXPECT_EQ(ya, RunMatMul(level, a.w, x, n, nullptr));
          EXPECT_EQ(yb, RunMatMul(level, b.w, x, n, nullptr));
          EXPECT_EQ(yc, RunMatMul(level, c.w, x, n, nullptr));
        }
      }
    }
  }
}

TEST(MatMulTest, NoNaNFromZerosOrLargeValues) {
  std::mt19937 rng(5);
  const int64_t rows = 10, n = 3;
  for (DType t : kAllTypes) {
    const int64_t cols = ColsFor(t, 96);
    OwnedWeights ow = RandomWeights(rng, t, rows, cols);
    std::vector<float> x(n * cols, 0.0f);  // token 0: all zeros (d_x = 0)
    for (int64_t i = cols; i < n * cols; ++i) x[i] = (i % 7 - 3) * 1e30f;  // huge but finite
    for (SimdLevel level : AvailableLevels()) {
      const std::vector<float> y = RunMatMul(level, ow.w, x, n, nullptr);
      for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(y[r], 0.0f) << SimdLevelName(level);
      for (float v : y) EXPECT_FALSE(std::isnan(v)) << SimdLevelName(level) << DTypeName(t);
    }
  }
}

// Every level's activation quantizer must write exactly the reference layout.
TEST(MatMulTest, PreparedActivationsIdenticalAcrossLevels) {
  std::mt19937 rng(6);
  namespace ki = kernels_internal;
  for (int64_t cols : {32, 64, 96, 4096}) {
    std::vector<float> x = RandomVector(rng, cols, 3.0f);
    // Exact rounding ties: a block with amax 127 has d = 1, so k + 0.5 must round away from 0.
    for (int i = 0; i < 32; ++i) x[i] = i == 0 ? 127.0f : (i % 2 ? 1.0f : -1.0f) * (i + 0.5f);
    const int64_t bytes = ki::QuantActsBytes(cols);
    for (DType t : kQuantTypes) {
      const int32_t c = GetWeightFormat(t).act_code_offset;
      std::vector<uint8_t> ref(bytes, 0xAB);
      ki::scalar::PrepareQuantActs(c, x.data(), cols, ref.data());
      // The tie block really rounded away from zero.
      const int8_t* qs = reinterpret_cast<const int8_t*>(ref.data());
      EXPECT_EQ(qs[1], 2);   // 1.5 -> 2
      EXPECT_EQ(qs[2], -3);  // -2.5 -> -3
      for (SimdLevel level : AvailableLevels()) {
        std::vector<uint8_t> got(bytes, 0xCD);
        if (level == SimdLevel::kAvx2) ki::avx2::PrepareQuantActs(c, x.data(), cols, got.data());
        if (level == SimdLevel::kAvx512) {
          if (!GetCpuFeatures().avx512_vnni) continue;
          ki::avx512::PrepareQuantActs(c, x.data(), cols, got.data());
        }
        if (level == SimdLevel::kScalar) got = ref;
        EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), bytes))
            << SimdLevelName(level) << " " << DTypeName(t) << " cols " << cols;
      }
    }
  }
}

}  // namespace
}  // namespace pagellm
