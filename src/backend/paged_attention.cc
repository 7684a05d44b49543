#include "backend/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/vector_ops.h"
#include "pagellm/check.h"

namespace pagellm {
namespace {

// One (token, kv head) task: all query heads of the group attend over positions
// [first_visible, pos] of their sequence.
void AttendGroup(const AttentionShape& s, const VectorOps& ops, const float* q_token,
                 const float* k_cache, const float* v_cache, const SequenceChunk& seq, int pos,
                 int kv_head, float* out_token, std::vector<float>& scores) {
  const int group = s.num_heads / s.num_kv_heads;
  const int d = s.head_dim;
  const int64_t token_stride = int64_t{s.num_kv_heads} * d;  // floats per cache slot
  const int first = s.sliding_window > 0 ? std::max(0, pos - s.sliding_window + 1) : 0;
  const int ctx = pos - first + 1;
  scores.resize(static_cast<size_t>(group) * ctx);

  // scores[g][j] = scale * q_g . k_j
  for (int j = 0; j < ctx; ++j) {
    const int p = first + j;
    const int block = seq.block_table[p / s.block_size];
    const float* k = k_cache + (int64_t{block} * s.block_size + p % s.block_size) * token_stride +
                     int64_t{kv_head} * d;
    for (int g = 0; g < group; ++g) {
      const float* q = q_token + int64_t{kv_head * group + g} * d;
      scores[static_cast<size_t>(g) * ctx + j] = ops.dot(q, k, d) * s.scale;
    }
  }
  // Softmax per head, in position order.
  for (int g = 0; g < group; ++g) {
    float* sc = scores.data() + static_cast<size_t>(g) * ctx;
    float mx = sc[0];
    for (int j = 1; j < ctx; ++j) mx = std::max(mx, sc[j]);
    float sum = 0.0f;
    for (int j = 0; j < ctx; ++j) {
      sc[j] = std::exp(sc[j] - mx);
      sum += sc[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < ctx; ++j) sc[j] *= inv;
    float* o = out_token + int64_t{kv_head * group + g} * d;
    std::fill(o, o + d, 0.0f);
  }
  // out_g = sum_j p_g[j] v_j, accumulated in position order.
  for (int j = 0; j < ctx; ++j) {
    const int p = first + j;
    const int block = seq.block_table[p / s.block_size];
    const float* v = v_cache + (int64_t{block} * s.block_size + p % s.block_size) * token_stride +
                     int64_t{kv_head} * d;
    for (int g = 0; g < group; ++g) {
      ops.axpy(scores[static_cast<size_t>(g) * ctx + j], v,
               out_token + int64_t{kv_head * group + g} * d, d);
    }
  }
}

void Run(const VectorOps& ops, const AttentionShape& s, const float* q, const float* k_cache,
         const float* v_cache, std::span<const SequenceChunk> seqs, float* out, ThreadPool* pool) {
  CHECK(s.num_heads % s.num_kv_heads == 0);
  // Flatten (sequence, token) so tasks can be indexed directly.
  struct TokenRef {
    int32_t seq;
    int32_t pos;
  };
  thread_local std::vector<TokenRef> tokens;
  tokens.clear();
  for (size_t i = 0; i < seqs.size(); ++i)
    for (int t = 0; t < seqs[i].num_tokens; ++t)
      tokens.push_back({static_cast<int32_t>(i), seqs[i].start_pos + t});
  const int64_t q_stride = int64_t{s.num_heads} * s.head_dim;
  const int64_t num_tasks = static_cast<int64_t>(tokens.size()) * s.num_kv_heads;
  const TokenRef* token_refs = tokens.data();
  auto task = [&](int64_t task_id, int) {
    thread_local std::vector<float> scores;
    const int64_t t = task_id / s.num_kv_heads;
    const int kv_head = static_cast<int>(task_id % s.num_kv_heads);
    const TokenRef& ref = token_refs[t];
    AttendGroup(s, ops, q + t * q_stride, k_cache, v_cache, seqs[ref.seq], ref.pos, kv_head,
                out + t * q_stride, scores);
  };
  if (pool != nullptr) {
    pool->Run(num_tasks, task);
  } else {
    for (int64_t i = 0; i < num_tasks; ++i) task(i, 0);
  }
}

}  // namespace

void PagedAttention(const AttentionShape& shape, const float* q, const float* k_cache,
                    const float* v_cache, std::span<const SequenceChunk> seqs, float* out,
                    ThreadPool* pool) {
  Run(GetVectorOps(), shape, q, k_cache, v_cache, seqs, out, pool);
}

void PagedAttentionScalar(const AttentionShape& shape, const float* q, const float* k_cache,
                          const float* v_cache, std::span<const SequenceChunk> seqs, float* out,
                          ThreadPool* pool) {
  Run(GetVectorOps(SimdLevel::kScalar), shape, q, k_cache, v_cache, seqs, out, pool);
}

}  // namespace pagellm
