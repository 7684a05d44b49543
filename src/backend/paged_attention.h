// Causal attention over a paged KV cache for a ragged batch.
//
// Each (token, KV head) pair is one task: the K/V rows of that head are read once for the
// whole query group that shares it (GQA/MQA). Scores are computed for every visible position,
// then softmax (max, exp, sum) and the V-weighted sum run in position order. Nothing depends
// on the block size, on the batch composition or on the thread split, so a token's output is
// bitwise identical however it is scheduled.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "base/thread_pool.h"

namespace pagellm {

struct AttentionShape {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;
  float scale = 1.0f;      // usually 1/sqrt(head_dim)
  int sliding_window = 0;  // 0 = unlimited; else a query at p sees positions > p - window
};

// q:   [total_tokens][num_heads][head_dim], already rotated.
// k_cache, v_cache: one layer, [num_blocks][block_size][num_kv_heads][head_dim]; must already
//   hold every position a query can see (including this step's tokens).
// out: [total_tokens][num_heads][head_dim].
void PagedAttention(const AttentionShape& shape, const float* q, const float* k_cache,
                    const float* v_cache, std::span<const SequenceChunk> seqs, float* out,
                    ThreadPool* pool);

// Same computation with a fixed kernel level, for tests (scalar reference vs SIMD).
void PagedAttentionScalar(const AttentionShape& shape, const float* q, const float* k_cache,
                          const float* v_cache, std::span<const SequenceChunk> seqs, float* out,
                          ThreadPool* pool);

}  // namespace pagellm
