// Paged attention: SIMD == scalar reference, both match a float64 reference, results do not
// depend on block size, block placement, batch composition or thread count, and slots that
// are not part of a sequence (poisoned with NaN) are never read.
#include "backend/paged_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

namespace pagellm {
namespace {

struct Seq {
  int start_pos;
  int num_tokens;
};

// Builds a cache where every sequence's positions live in shuffled blocks, all other slots NaN.
struct Fixture {
  AttentionShape shape;
  std::vector<float> k_cache, v_cache;
  std::vector<std::vector<int32_t>> tables;
  std::vector<SequenceChunk> chunks;
  std::vector<float> q;
  // Logical K/V per sequence: [pos][kv_head][head_dim]
  std::vector<std::vector<float>> k_logical, v_logical;

  Fixture(AttentionShape s, const std::vector<Seq>& seqs, uint32_t seed) : shape(s) {
    // Separate generators: the logical data must not depend on how many blocks are shuffled.
    std::mt19937 rng(seed), placement(seed + 1000);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int slot = s.num_kv_heads * s.head_dim;
    int total_blocks = 1;  // block 0 = null block
    for (const Seq& q : seqs)
      total_blocks += (q.start_pos + q.num_tokens + s.block_size - 1) / s.block_size;
    total_blocks += 3;  // spare blocks that stay NaN
    std::vector<int32_t> ids(total_blocks - 1);
    std::iota(ids.begin(), ids.end(), 1);
    std::shuffle(ids.begin(), ids.end(), placement);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    k_cache.assign(static_cast<size_t>(total_blocks) * s.block_size * slot, nan);
    v_cache = k_cache;
    size_t next = 0;
    for (const Seq& sq : seqs) {
      const int len = sq.start_pos + sq.num_tokens;
      std::vector<int32_t> table;
      for (int b = 0; b * s.block_size < len; ++b) table.push_back(ids[next++]);
      std::vector<float> kl(static_cast<size_t>(len) * slot), vl(kl.size());
      for (auto& x : kl) x = nd(rng);
      for (auto& x : vl) x = nd(rng);
      for (int p = 0; p < len; ++p) {
        const size_t dst =
            (static_cast<size_t>(table[p / s.block_size]) * s.block_size + p % s.block_size) * slot;
        std::memcpy(&k_cache[dst], &kl[static_cast<size_t>(p) * slot], slot * sizeof(float));
        std::memcpy(&v_cache[dst], &vl[static_cast<size_t>(p) * slot], slot * sizeof(float));
      }
      tables.push_back(std::move(table));
      k_logical.push_back(std::move(kl));
      v_logical.push_back(std::move(vl));
    }
    for (size_t i = 0; i < seqs.size(); ++i)
      chunks.push_back({seqs[i].num_tokens, seqs[i].start_pos, tables[i], false});
    int tokens = 0;
    for (const Seq& sq : seqs) tokens += sq.num_tokens;
    q.resize(static_cast<size_t>(tokens) * s.num_heads * s.head_dim);
    for (auto& x : q) x = nd(rng);
  }

  std::vector<float> Run(bool scalar, ThreadPool* pool) const {
    std::vector<float> out(q.size());
    if (scalar) {
      PagedAttentionScalar(shape, q.data(), k_cache.data(), v_cache.data(), chunks, out.data(),
                           pool);
    } else {
      PagedAttention(shape, q.data(), k_cache.data(), v_cache.data(), chunks, out.data(), pool);
    }
    return out;
  }

  // float64 reference over the logical K/V.
  std::vector<double> Reference() const {
    const int d = shape.head_dim, group = shape.num_heads / shape.num_kv_heads;
    std::vector<double> out(q.size());
    size_t t = 0;
    for (size_t si = 0; si < chunks.size(); ++si) {
      for (int i = 0; i < chunks[si].num_tokens; ++i, ++t) {
        const int pos = chunks[si].start_pos + i;
        const int first =
            shape.sliding_window > 0 ? std::max(0, pos - shape.sliding_window + 1) : 0;
        for (int h = 0; h < shape.num_heads; ++h) {
          const int g = h / group;
          const float* qv = &q[(t * shape.num_heads + h) * d];
          std::vector<double> sc;
          for (int p = first; p <= pos; ++p) {
            const float* kv = &k_logical[si][(static_cast<size_t>(p) * shape.num_kv_heads + g) * d];
            double dot = 0;
            for (int x = 0; x < d; ++x) dot += static_cast<double>(qv[x]) * kv[x];
            sc.push_back(dot * shape.scale);
          }
          const double mx = *std::max_element(sc.begin(), sc.end());
          double sum = 0;
          for (double& v : sc) sum += (v = std::exp(v - mx));
          for (int x = 0; x < d; ++x) {
            double acc = 0;
            for (int p = first; p <= pos; ++p)
              acc += sc[p - first] / sum *
                     v_logical[si][(static_cast<size_t>(p) * shape.num_kv_heads + g) * d + x];
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

const std::vector<Seq> kRagged = {{0, 7}, {13, 1}, {0, 1}, {40, 3}, {5, 20}};

TEST(PagedAttentionTest, MatchesFloat64ReferenceAndNeverReadsUnusedSlots) {
  ThreadPool pool(2);
  for (AttentionShape s : {Shape(8, 4, 8, 16), Shape(4, 1, 64, 1), Shape(6, 2, 128, 7),
                           Shape(2, 2, 16, 256), Shape(4, 2, 32, 4, /*window=*/9)}) {
    Fixture f(s, kRagged, 11);
    const std::vector<double> ref = f.Reference();
    for (bool scalar : {true, false}) {
      const std::vector<float> out = f.Run(scalar, &pool);
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_TRUE(std::isfinite(out[i])) << "read a NaN-poisoned slot, head_dim " << s.head_dim;
        ASSERT_NEAR(out[i], ref[i], 2e-5 * (1 + std::abs(ref[i]))) << i;
      }
    }
  }
}

TEST(PagedAttentionTest, BitwiseInvariantToBlockSizeBatchAndThreads) {
  // The same sequence (same logical K/V, same query) alone, in a batch, with other block sizes
  // and thread counts must give identical bits.
  ThreadPool one(1), two(2), three(3);
  const AttentionShape base = Shape(8, 2, 64, 16);
  Fixture batch(base, kRagged, 5);
  const std::vector<float> want = batch.Run(false, &two);
  for (int block_size : {1, 3, 16, 64, 256}) {
    AttentionShape s = base;
    s.block_size = block_size;
    Fixture f(s, kRagged, 5);  // same seed: same logical K/V and queries
    for (ThreadPool* pool : {&one, &two, &three}) {
      const std::vector<float> got = f.Run(false, pool);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
          << "block size " << block_size << " threads " << pool->num_threads();
    }
  }
  // Alone: sequence 3 of the batch on its own.
  Fixture alone(base, kRagged, 5);
  std::vector<SequenceChunk> just3 = {alone.chunks[3]};
  size_t offset = 0;
  for (int i = 0; i < 3; ++i) offset += kRagged[i].num_tokens;
  const size_t stride = static_cast<size_t>(base.num_heads) * base.head_dim;
  std::vector<float> out(kRagged[3].num_tokens * stride);
  PagedAttention(base, alone.q.data() + offset * stride, alone.k_cache.data(), alone.v_cache.data(),
                 just3, out.data(), &two);
  ASSERT_EQ(0, std::memcmp(out.data(), want.data() + offset * stride, out.size() * sizeof(float)));
}

}  // namespace
}  // namespace pagellm
