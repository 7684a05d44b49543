// Paged attention, for every KV cache format: SIMD and scalar kernels match a float64
// reference (over the decoded cache: kernel error only; and over the unquantised K/V: the
// format's cost, within a per-dtype tolerance), results do not depend on block size, block
// placement, batch composition or thread count, and slots that are not part of a sequence
// (poisoned with 0xFF bytes, NaN in every format) are never read.
#include "kernels/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "kernels/kv_quant.h"

namespace pagellm {
namespace {

struct Seq {
  int start_pos;
  int num_tokens;
};

// Largest |out - float64 reference on the unquantised K/V| allowed per format, for K/V and q
// drawn from N(0, 1) (a few 8-sigma outliers included). Outputs are convex combinations of V
// rows, so these are absolute errors on values of magnitude ~1.
double FormatTolerance(KvCacheDtype d) {
  switch (d) {
    case KvCacheDtype::kFloat32:
      return 2e-5;
    case KvCacheDtype::kBFloat16:
      return 0.06;
    case KvCacheDtype::kFloat16:
      return 0.012;
    case KvCacheDtype::kFp8E4m3:
      return 0.25;
    case KvCacheDtype::kFp8E5m2:
      return 1.5;  // 2 mantissa bits; the error is the outlier row
    case KvCacheDtype::kInt8:
      return 0.08;
    case KvCacheDtype::kInt4:
      return 0.9;
    default:
      return 0;
  }
}

const KvCacheDtype kAllDtypes[] = {
    KvCacheDtype::kFloat32, KvCacheDtype::kBFloat16, KvCacheDtype::kFloat16, KvCacheDtype::kFp8E4m3,
    KvCacheDtype::kFp8E5m2, KvCacheDtype::kInt8,     KvCacheDtype::kInt4};

void HadamardDouble(double* x, int n) {
  for (int h = 1; h < n; h *= 2)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const double a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
  for (int i = 0; i < n; ++i) x[i] /= std::sqrt(static_cast<double>(n));
}

// Builds a cache where every sequence's positions live in shuffled blocks, all other bytes
// 0xFF (NaN).
struct Fixture {
  AttentionShape shape;
  KvCacheDtype dtype;
  int64_t row_bytes;
  bool rotated;
  float k_scale = 1.0f, v_scale = 1.0f;
  // K smoothing (kv/kv_cache_storage.h): rows store (K - c) / s; empty = none.
  std::vector<float> k_offset, k_smooth;  // [num_kv_heads][head_dim]
  std::vector<uint8_t> k_cache, v_cache;
  std::vector<std::vector<int32_t>> tables;
  std::vector<SequenceChunk> chunks;
  std::vector<float> q;
  // Per sequence, [pos][kv_head][head_dim]: the K/V as given, and as decoded from the cache
  // (back in the model basis).
  std::vector<std::vector<float>> k_logical, v_logical;
  std::vector<std::vector<double>> k_decoded, v_decoded;

  // k_shift: every K gets the per-channel constant k_shift x (1 + channel % 3) - 1 added (the
  // offsets real K carries). smooth: store K smoothed with c near that shift and (int and
  // float formats) s in [0.5, 1.5], non-trivial on purpose: the kernel must scale q by s and
  // may ignore c.
  Fixture(AttentionShape s, const std::vector<Seq>& seqs, uint32_t seed,
          KvCacheDtype dt = KvCacheDtype::kFloat32, float k_shift = 0.0f, bool smooth = false)
      : shape(s),
        dtype(dt),
        row_bytes(KvRowBytes(dt, s.head_dim)),
        rotated(KvRowsRotated(dt, s.head_dim)) {
    if (smooth) {
      for (int h = 0; h < s.num_kv_heads; ++h)
        for (int x = 0; x < s.head_dim; ++x) {
          k_offset.push_back(k_shift * (1 + x % 3) - 1 + 0.1f * h);
          // fp8 stores K - c only (s = 1), as the engine's calibration does.
          k_smooth.push_back(dt == KvCacheDtype::kFp8E4m3 || dt == KvCacheDtype::kFp8E5m2
                                 ? 1.0f
                                 : 0.5f + static_cast<float>((x * 7 + h) % 11) / 10.0f);
        }
    }
    if (dtype == KvCacheDtype::kFp8E4m3) {
      k_scale = 32.0f / kFp8E4m3Max;  // covers the 8-sigma outliers without saturating
      v_scale = 24.0f / kFp8E4m3Max;
    }
    // Separate generators: the logical data must not depend on how many blocks are shuffled.
    std::mt19937 rng(seed), placement(seed + 1000);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int d = s.head_dim, heads = s.num_kv_heads;
    int total_blocks = 1;  // block 0 = null block
    for (const Seq& sq : seqs)
      total_blocks += (sq.start_pos + sq.num_tokens + s.block_size - 1) / s.block_size;
    total_blocks += 3;  // spare blocks that stay NaN
    std::vector<int32_t> ids(total_blocks - 1);
    std::iota(ids.begin(), ids.end(), 1);
    std::shuffle(ids.begin(), ids.end(), placement);
    k_cache.assign(static_cast<size_t>(total_blocks) * s.block_size * heads * row_bytes, 0xFF);
    v_cache = k_cache;
    size_t next = 0;
    std::vector<float> tmp(d), dec(d);
    for (const Seq& sq : seqs) {
      const int len = sq.start_pos + sq.num_tokens;
      std::vector<int32_t> table;
      for (int b = 0; b * s.block_size < len; ++b) table.push_back(ids[next++]);
      std::vector<float> kl(static_cast<size_t>(len) * heads * d), vl(kl.size());
      for (auto& x : kl) x = nd(rng);
      for (auto& x : vl) x = nd(rng);
      kl[kl.size() / 3] *= 8;  // outliers
      if (k_shift != 0)
        for (size_t i = 0; i < kl.size(); ++i) kl[i] += k_shift * (1 + (i % d) % 3) - 1;
      vl[vl.size() / 2] *= -8;
      std::vector<double> kd(kl.size()), vd(kl.size());
      for (int p = 0; p < len; ++p) {
        const size_t block = static_cast<size_t>(table[p / s.block_size]);
        const size_t slot = p % s.block_size;
        for (int h = 0; h < heads; ++h) {
          const size_t off = (static_cast<size_t>(p) * heads + h) * d;
          for (int kv = 0; kv < 2; ++kv) {
            const std::vector<float>& src = kv == 0 ? kl : vl;
            std::vector<double>& decoded = kv == 0 ? kd : vd;
            const float sc = kv == 0 ? k_scale : v_scale;
            std::copy_n(&src[off], d, tmp.data());
            const bool sm = kv == 0 && !k_smooth.empty();
            if (sm)
              for (int x = 0; x < d; ++x)
                tmp[x] = (tmp[x] - k_offset[h * d + x]) / k_smooth[h * d + x];
            if (rotated) HadamardRotate(tmp.data(), d);
            uint8_t* dst = (kv == 0 ? k_cache : v_cache).data() +
                           ((block * heads + h) * s.block_size + slot) * row_bytes;
            QuantizeKvRow(dtype, tmp.data(), d, sc, dst);
            DequantizeKvRow(dtype, dst, d, sc, dec.data());
            for (int x = 0; x < d; ++x) decoded[off + x] = dec[x];
            if (rotated) HadamardDouble(&decoded[off], d);
            if (sm)
              for (int x = 0; x < d; ++x)
                decoded[off + x] = decoded[off + x] * k_smooth[h * d + x] + k_offset[h * d + x];
          }
        }
      }
      tables.push_back(std::move(table));
      k_logical.push_back(std::move(kl));
      v_logical.push_back(std::move(vl));
      k_decoded.push_back(std::move(kd));
      v_decoded.push_back(std::move(vd));
    }
    for (size_t i = 0; i < seqs.size(); ++i)
      chunks.push_back({seqs[i].num_tokens, seqs[i].start_pos, tables[i], false});
    int tokens = 0;
    for (const Seq& sq : seqs) tokens += sq.num_tokens;
    q.resize(static_cast<size_t>(tokens) * s.num_heads * d);
    for (auto& x : q) x = nd(rng);
  }

  KvLayerView View() const {
    KvLayerView v;
    v.dtype = dtype;
    v.k = k_cache.data();
    v.v = v_cache.data();
    v.row_bytes = row_bytes;
    v.k_scale = k_scale;
    v.v_scale = v_scale;
    v.rotated = rotated;
    v.k_smooth = k_smooth.empty() ? nullptr : k_smooth.data();
    return v;
  }

  std::vector<float> Run(SimdLevel level, ThreadPool* pool) const {
    std::vector<float> out(q.size());
    PagedAttentionAt(level, shape, q.data(), View(), chunks, out.data(), pool);
    return out;
  }

  // float64 reference over the decoded (decoded = true) or the original K/V.
  std::vector<double> Reference(bool decoded) const {
    const int d = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
    std::vector<double> out(q.size());
    size_t t = 0;
    for (size_t si = 0; si < chunks.size(); ++si) {
      auto kval = [&](size_t i) {
        return decoded ? k_decoded[si][i] : static_cast<double>(k_logical[si][i]);
      };
      auto vval = [&](size_t i) {
        return decoded ? v_decoded[si][i] : static_cast<double>(v_logical[si][i]);
      };
      for (int i = 0; i < chunks[si].num_tokens; ++i, ++t) {
        const int pos = chunks[si].start_pos + i;
        const int first =
            shape.sliding_window > 0 ? std::max(0, pos - shape.sliding_window + 1) : 0;
        for (int h = 0; h < shape.num_heads; ++h) {
          const int g = h / group;
          const float* qv = &q[(t * shape.num_heads + h) * d];
          std::vector<double> sc;
          for (int p = first; p <= pos; ++p) {
            const size_t base = (static_cast<size_t>(p) * shape.num_kv_heads + g) * d;
            double dot = 0;
            for (int x = 0; x < d; ++x) dot += static_cast<double>(qv[x]) * kval(base + x);
            const double scaled = dot * shape.scale;
            sc.push_back(shape.softcap > 0 ? shape.softcap * std::tanh(scaled / shape.softcap)
                                           : scaled);
          }
          const double mx = *std::max_element(sc.begin(), sc.end());
          double sum = 0;
          for (double& v : sc) sum += (v = std::exp(v - mx));
          for (int x = 0; x < d; ++x) {
            double acc = 0;
            for (int p = first; p <= pos; ++p)
              acc += sc[p - first] / sum *
                     vval((static_cast<size_t>(p) * shape.num_kv_heads + g) * d + x);
            out[(t * shape.num_heads + h) * d + x] = acc;
          }
        }
      }
    }
    return out;
  }
};

AttentionShape Shape(int heads, int kv_heads, int head_dim, int block_size, int window = 0) {
  AttentionShape s;
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.block_size = block_size;
  s.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  s.sliding_window = window;
  return s;
}

// The last sequence spans three kAttentionChunk chunks (chunk merge path).
const std::vector<Seq> kRagged = {{0, 7}, {13, 1}, {0, 1}, {40, 3}, {5, 20}, {1100, 2}};

std::vector<SimdLevel> Levels() {
  std::vector<SimdLevel> l = {SimdLevel::kScalar};
  if (ActiveSimdLevel() >= SimdLevel::kAvx2) l.push_back(SimdLevel::kAvx2);
  if (ActiveSimdLevel() == SimdLevel::kAvx512) l.push_back(SimdLevel::kAvx512);
  return l;
}

TEST(PagedAttentionTest, EveryDtypeMatchesFloat64ReferenceAndNeverReadsUnusedSlots) {
  ThreadPool pool(2);
  for (KvCacheDtype dt : kAllDtypes) {
    for (AttentionShape s :
         {Shape(8, 4, 8, 16), Shape(4, 1, 64, 1), Shape(6, 2, 128, 7), Shape(2, 2, 16, 256),
          Shape(4, 2, 32, 4, /*window=*/9), Shape(3, 1, 48, 16)}) {
      // Quantised formats run smoothed over K with per-channel offsets, as the engine does.
      const bool quantized = KvDtypeIsQuantized(dt);
      Fixture f(s, kRagged, 11, dt, quantized ? 4.0f : 0.0f, quantized);
      const std::vector<double> ref = f.Reference(/*decoded=*/true);
      const std::vector<double> orig = f.Reference(/*decoded=*/false);
      for (SimdLevel level : Levels()) {
        const std::vector<float> out = f.Run(level, &pool);
        double worst = 0;
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_TRUE(std::isfinite(out[i]))
              << "read a NaN-poisoned slot, " << KvCacheDtypeName(dt) << " head_dim " << s.head_dim;
          ASSERT_NEAR(out[i], ref[i], 3e-5 * (1 + std::abs(ref[i])))
              << KvCacheDtypeName(dt) << " head_dim " << s.head_dim << " level "
              << static_cast<int>(level) << " at " << i;
          worst = std::max(worst, std::abs(out[i] - orig[i]));
        }
        EXPECT_LE(worst, FormatTolerance(dt))
            << KvCacheDtypeName(dt) << " head_dim " << s.head_dim << " vs unquantised K/V";
      }
    }
  }
}

TEST(PagedAttentionTest, SoftCapMatchesFloat64ReferenceAtEveryLevel) {
  // Gemma 2: scores s -> cap · tanh(s / cap) before the softmax, with and without a window,
  // head_dim 16/64/128 (the AVX-512 transposed and fixed-width paths) and a generic one; the
  // scale is large enough that the cap changes the output.
  ThreadPool pool(2);
  for (KvCacheDtype dt : {KvCacheDtype::kFloat32, KvCacheDtype::kInt8}) {
    for (AttentionShape s : {Shape(8, 4, 16, 16), Shape(4, 1, 64, 5, /*window=*/9),
                             Shape(4, 2, 128, 16), Shape(2, 2, 48, 7, /*window=*/6)}) {
      s.scale = 1.0f;
      s.softcap = 2.5f;
      const Fixture f(s, kRagged, 21, dt);
      AttentionShape uncapped_shape = s;
      uncapped_shape.softcap = 0.0f;
      Fixture uncapped = f;
      uncapped.shape = uncapped_shape;
      const std::vector<double> ref = f.Reference(/*decoded=*/true);
      const std::vector<double> plain = uncapped.Reference(/*decoded=*/true);
      double effect = 0;
      for (size_t i = 0; i < ref.size(); ++i)
        effect = std::max(effect, std::abs(ref[i] - plain[i]));
      EXPECT_GT(effect, 1e-2) << "the cap should change the output";
      for (SimdLevel level : Levels()) {
        const std::vector<float> out = f.Run(level, &pool);
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_NEAR(out[i], ref[i], 3e-5 * (1 + std::abs(ref[i])))
              << KvCacheDtypeName(dt) << " head_dim " << s.head_dim << " level "
              << static_cast<int>(level) << " at " << i;
        }
      }
    }
  }
}

TEST(PagedAttentionTest, PerChannelKOffsetLeavesOutputUnchanged) {
  // Attention is invariant to K += c (one vector per KV head for every position): q.c is the
  // same for all positions and softmax removes it. So a shifted K stored smoothed (c dropped,
  // q scaled by s) must give the unshifted output, and so must a shifted float32 K as is.
  ThreadPool pool(2);
  for (AttentionShape s : {Shape(8, 4, 8, 16), Shape(4, 2, 64, 4, /*window=*/9)}) {
    const Fixture plain(s, kRagged, 5);
    const Fixture shifted(s, kRagged, 5, KvCacheDtype::kFloat32, 3.0f, /*smooth=*/false);
    const Fixture smoothed(s, kRagged, 5, KvCacheDtype::kFloat32, 3.0f, /*smooth=*/true);
    for (SimdLevel level : Levels()) {
      const std::vector<float> a = plain.Run(level, &pool);
      const std::vector<float> b = shifted.Run(level, &pool);
      const std::vector<float> c = smoothed.Run(level, &pool);
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(b[i], a[i], 1e-4 * (1 + std::abs(a[i]))) << "shifted K at " << i;
        ASSERT_NEAR(c[i], a[i], 1e-4 * (1 + std::abs(a[i]))) << "smoothed K at " << i;
      }
    }
  }
}

TEST(PagedAttentionTest, Fp8DecodersMatchScalarOnEveryByteAndKeepPoisonNaN) {
  // One position: the output is exactly its decoded V row (softmax weight 1). head_dim 256 so
  // the V row holds every byte value once; NaN patterns (e4m3 0x7F/0xFF, e5m2 0x7D..0x7F,
  // 0xFD..0xFF) must come out NaN, everything else equal to the scalar decoder times the scale.
  const AttentionShape s = Shape(1, 1, 256, 16);
  const std::vector<int32_t> table = {1};
  const std::vector<SequenceChunk> chunks = {{1, 0, table, false}};
  const std::vector<float> q(256, 0.01f);
  for (KvCacheDtype dt : {KvCacheDtype::kFp8E4m3, KvCacheDtype::kFp8E5m2}) {
    std::vector<uint8_t> k(2 * 16 * 256, 0), v(2 * 16 * 256, 0xFF);
    for (int i = 0; i < 256; ++i) v[16 * 256 + i] = static_cast<uint8_t>(i);
    KvLayerView view;
    view.dtype = dt;
    view.k = k.data();
    view.v = v.data();
    view.row_bytes = 256;
    view.v_scale = dt == KvCacheDtype::kFp8E4m3 ? 0.375f : 1.0f;
    for (SimdLevel level : Levels()) {
      std::vector<float> out(256);
      PagedAttentionAt(level, s, q.data(), view, chunks, out.data(), nullptr);
      for (int i = 0; i < 256; ++i) {
        const uint8_t b = static_cast<uint8_t>(i);
        const float want =
            (dt == KvCacheDtype::kFp8E4m3 ? Fp8E4m3ToFloat(b) : Fp8E5m2ToFloat(b)) * view.v_scale;
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(out[i])) << KvCacheDtypeName(dt) << " byte " << i;
        } else {
          EXPECT_EQ(out[i], want) << KvCacheDtypeName(dt) << " byte " << i << " level "
                                  << static_cast<int>(level);
        }
      }
    }
  }
}

TEST(PagedAttentionTest, BitwiseInvariantToBlockSizeBatchAndThreadsForEveryDtype) {
  // The same sequence (same logical K/V, same query) alone, in a batch, with other block sizes
  // and thread counts must give identical bits.
  ThreadPool one(1), two(2), three(3);
  const AttentionShape base = Shape(8, 2, 64, 16);
  for (KvCacheDtype dt : kAllDtypes) {
    Fixture batch(base, kRagged, 5, dt);
    const std::vector<float> want = batch.Run(ActiveSimdLevel(), &two);
    for (int block_size : {1, 3, 16, 64, 256}) {
      AttentionShape s = base;
      s.block_size = block_size;
      Fixture f(s, kRagged, 5, dt);  // same seed: same logical K/V and queries
      for (ThreadPool* pool : {&one, &two, &three}) {
        const std::vector<float> got = f.Run(ActiveSimdLevel(), pool);
        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
            << KvCacheDtypeName(dt) << " block size " << block_size << " threads "
            << pool->num_threads();
      }
    }
    // Alone: sequences 3 and 5 of the batch on their own.
    for (int which : {3, 5}) {
      std::vector<SequenceChunk> just = {batch.chunks[which]};
      size_t offset = 0;
      for (int i = 0; i < which; ++i) offset += kRagged[i].num_tokens;
      const size_t stride = static_cast<size_t>(base.num_heads) * base.head_dim;
      std::vector<float> out(kRagged[which].num_tokens * stride);
      PagedAttention(base, batch.q.data() + offset * stride, batch.View(), just, out.data(), &two);
      ASSERT_EQ(0,
                std::memcmp(out.data(), want.data() + offset * stride, out.size() * sizeof(float)))
          << KvCacheDtypeName(dt) << " sequence " << which;
    }
  }
}

TEST(PagedAttentionTest, LongContextsUpTo16KMatchReferenceInEveryDtype) {
  // Prefill runs and decode tokens at depths 4K and 16K (many 512-position chunks merged),
  // caches NaN-poisoned outside the sequences, every format, SIMD and scalar.
  ThreadPool pool(2);
  const std::vector<Seq> seqs = {{16374, 10}, {4090, 6}};
  const AttentionShape s = Shape(4, 1, 64, 16);
  for (KvCacheDtype dt : kAllDtypes) {
    const bool quantized = KvDtypeIsQuantized(dt);
    Fixture f(s, seqs, 31, dt, quantized ? 4.0f : 0.0f, quantized);
    const std::vector<double> ref = f.Reference(/*decoded=*/true);
    for (SimdLevel level : Levels()) {
      const std::vector<float> out = f.Run(level, &pool);
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_TRUE(std::isfinite(out[i])) << KvCacheDtypeName(dt) << " read a poisoned slot";
        ASSERT_NEAR(out[i], ref[i], 3e-5 * (1 + std::abs(ref[i])))
            << KvCacheDtypeName(dt) << " level " << static_cast<int>(level) << " at " << i;
      }
    }
  }
}

TEST(PagedAttentionTest, BitwiseInvariantToHowAPromptIsSplitIntoSteps) {
  // Query runs share decoded K/V tiles (prefill): a token's output must be the same whether it
  // is computed in a long prefill chunk, in pieces of any size, or alone as a decode token,
  // including across the 512-position chunk boundary (merged partials) and with GQA groups.
  ThreadPool two(2);
  for (KvCacheDtype dt : kAllDtypes) {
    for (AttentionShape s : {Shape(8, 2, 64, 16), Shape(4, 4, 32, 7), Shape(6, 1, 128, 16)}) {
      const std::vector<Seq> seqs = {{0, 45}, {490, 60}, {1030, 19}};
      Fixture f(s, seqs, 21, dt);
      const std::vector<float> whole = f.Run(ActiveSimdLevel(), &two);
      const size_t stride = static_cast<size_t>(s.num_heads) * s.head_dim;
      for (int piece : {1, 5, 17}) {
        size_t offset = 0;
        for (size_t i = 0; i < seqs.size(); ++i) {
          for (int t = 0; t < seqs[i].num_tokens; t += piece) {
            const int n = std::min(piece, seqs[i].num_tokens - t);
            SequenceChunk c = f.chunks[i];
            c.start_pos = seqs[i].start_pos + t;
            c.num_tokens = n;
            const std::vector<SequenceChunk> one = {c};
            std::vector<float> out(n * stride);
            PagedAttention(s, f.q.data() + (offset + t) * stride, f.View(), one, out.data(), &two);
            ASSERT_EQ(0, std::memcmp(out.data(), whole.data() + (offset + t) * stride,
                                     out.size() * sizeof(float)))
                << KvCacheDtypeName(dt) << " head_dim " << s.head_dim << " piece " << piece
                << " sequence " << i << " token " << t;
          }
          offset += seqs[i].num_tokens;
        }
      }
    }
  }
}

TEST(PagedAttentionTest, FloatConvenienceOverloadsAgree) {
  ThreadPool pool(2);
  const AttentionShape s = Shape(4, 2, 32, 8);
  Fixture f(s, kRagged, 3);
  std::vector<float> a(f.q.size()), b(f.q.size());
  PagedAttention(s, f.q.data(), reinterpret_cast<const float*>(f.k_cache.data()),
                 reinterpret_cast<const float*>(f.v_cache.data()), f.chunks, a.data(), &pool);
  const std::vector<float> want = f.Run(ActiveSimdLevel(), &pool);
  ASSERT_EQ(0, std::memcmp(a.data(), want.data(), a.size() * sizeof(float)));
  PagedAttentionScalar(s, f.q.data(), reinterpret_cast<const float*>(f.k_cache.data()),
                       reinterpret_cast<const float*>(f.v_cache.data()), f.chunks, b.data(), &pool);
  const std::vector<float> want_scalar = f.Run(SimdLevel::kScalar, &pool);
  ASSERT_EQ(0, std::memcmp(b.data(), want_scalar.data(), b.size() * sizeof(float)));
}

}  // namespace
}  // namespace pagellm

namespace pagellm {
namespace {

TEST(PagedAttentionTest, TileRowOffsetsEqualRowOffsetAcrossBlockBoundaries) {
  std::mt19937 rng(11);
  for (int block_size : {1, 3, 16, 32, 256}) {
    AttentionShape s;
    s.num_heads = 8;
    s.num_kv_heads = 4;
    s.head_dim = 32;
    s.block_size = block_size;
    KvLayerView kv;
    kv.row_bytes = 72;
    std::vector<int32_t> table(2048 / block_size + 2);
    std::iota(table.begin(), table.end(), 1);
    std::shuffle(table.begin(), table.end(), rng);
    for (int trial = 0; trial < 200; ++trial) {
      const int first = static_cast<int>(rng() % 1500);
      const int n = 1 + static_cast<int>(rng() % 16);
      const int head = static_cast<int>(rng() % 4);
      int64_t offsets[16];
      attention_internal::TileRowOffsets(s, kv, table.data(), first, n, head, offsets);
      for (int j = 0; j < n; ++j)
        ASSERT_EQ(offsets[j], kv.RowOffset(s, table.data(), first + j, head))
            << "block size " << block_size << " position " << first + j;
    }
  }
}

}  // namespace
}  // namespace pagellm
