// Causal attention over a paged KV cache for a ragged batch, with the cache in any KV element
// format (kv/kv_quant.h): rows are decoded inside the kernel, a tile of 16 positions at a time
// into an L1-resident scratch, never as a full-precision copy of the cache.
//
// Work split: a (query run, KV head, context chunk) triple is one task. A query run is up to
// kMaxQueryRun consecutive tokens of one sequence (prefill, verification; a decode token is a
// run of one), and the query heads of a GQA group share the task too, so each KV row is read
// and decoded once per run and group instead of once per token (flash-attention style tiling
// of the queries). A context chunk is kAttentionChunk positions counted from the first visible
// position; tasks keep a flash-style running (max, sum, accumulator) per query over tiles of 16
// positions (online softmax), and the chunks of one token are merged in chunk order afterwards.
// Chunk and tile boundaries depend only on the token's position, never on the block size, the
// run it shares, the batch composition or the thread split, so a token's output is bitwise
// identical however it is scheduled.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "base/cpu_features.h"
#include "base/forward_batch.h"
#include "base/kv_cache_dtype.h"
#include "base/thread_pool.h"

namespace pagellm {

struct AttentionShape {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;
  float scale = 1.0f;      // usually 1/sqrt(head_dim)
  int sliding_window = 0;  // 0 = unlimited; else a query at p sees positions > p - window
  // > 0: each scaled score s becomes softcap · tanh(s / softcap) before the softmax (Gemma 2).
  float softcap = 0.0f;
};

// Positions per task (see above); long contexts split so that one decode token keeps every
// thread busy even with few KV heads.
inline constexpr int kAttentionChunk = 512;

// One layer of the cache as stored: K and V each [num_blocks][num_kv_heads][block_size] rows
// of row_bytes bytes in `dtype` (canonical: kFp8 already mapped to kFp8E4m3).
struct KvLayerView {
  KvCacheDtype dtype = KvCacheDtype::kFloat32;
  const uint8_t* k = nullptr;
  const uint8_t* v = nullptr;
  int64_t row_bytes = 0;
  float k_scale = 1.0f;  // fp8_e4m3 per-layer scales
  float v_scale = 1.0f;
  bool rotated = false;  // rows stored Hadamard-rotated (int4): q rotated in, output back
  // K stored smoothed (kv/kv_cache_storage.h): [num_kv_heads][head_dim] per-channel ranges s
  // that multiply q before the score dot products (then q is rotated when rows are); null =
  // none. The offset c needs nothing: softmax cancels it.
  const float* k_smooth = nullptr;

  // Byte offset, within k or v, of the row of position `pos` for `kv_head`: the position's
  // block comes from the sequence's block table, rows are [block][kv_head][slot]
  // (kv/kv_cache_storage.h).
  int64_t RowOffset(const AttentionShape& s, const int32_t* block_table, int pos,
                    int kv_head) const {
    const int64_t head_run = int64_t{block_table[pos / s.block_size]} * s.num_kv_heads + kv_head;
    return (head_run * s.block_size + pos % s.block_size) * row_bytes;
  }
};

// A float32 cache ([num_blocks][num_kv_heads][block_size][head_dim] floats).
KvLayerView FloatKvView(const AttentionShape& shape, const float* k_cache, const float* v_cache);

// q:   [total_tokens][num_heads][head_dim], already RoPE-rotated.
// kv:  must already hold every position a query can see (including this step's tokens).
// out: [total_tokens][num_heads][head_dim].
void PagedAttention(const AttentionShape& shape, const float* q, const KvLayerView& kv,
                    std::span<const SequenceChunk> seqs, float* out, ThreadPool* pool);
// Same computation with a fixed kernel level, for tests (scalar reference vs SIMD).
void PagedAttentionAt(SimdLevel level, const AttentionShape& shape, const float* q,
                      const KvLayerView& kv, std::span<const SequenceChunk> seqs, float* out,
                      ThreadPool* pool);

// float32-cache conveniences.
void PagedAttention(const AttentionShape& shape, const float* q, const float* k_cache,
                    const float* v_cache, std::span<const SequenceChunk> seqs, float* out,
                    ThreadPool* pool);
void PagedAttentionScalar(const AttentionShape& shape, const float* q, const float* k_cache,
                          const float* v_cache, std::span<const SequenceChunk> seqs, float* out,
                          ThreadPool* pool);

namespace attention_internal {

// One task's work: a run of consecutive query tokens of one sequence (a query tile; one token
// for decode) and one KV head, over the positions [begin, end_i) of one context chunk, where
// end_i grows with the token (causal). The K/V rows of a tile of 16 positions are read and
// decoded once for every query of the run; each query's arithmetic is exactly what it would be
// alone (same tiles, same masks, same order), so grouping queries never changes a bit.
struct AttendQuery {
  const float* q;  // [group][head_dim], already rotated/scaled when the cache is
  int end;         // positions [begin, end) are visible; ascending along the run
  // On return m[g] is the running max of the scaled scores, l[g] the sum of exp(score - m[g])
  // and acc[g][.] the unnormalised exp-weighted sum of V rows (in the stored basis).
  float* m;
  float* l;
  float* acc;
};
struct AttendArgs {
  const AttentionShape* shape;
  const KvLayerView* kv;
  const int32_t* block_table;
  int begin;
  int kv_head;
  const AttendQuery* queries;
  int num_queries;
};
using AttendFn = void (*)(const AttendArgs&);
void AttendScalar(const AttendArgs& a);
void AttendAvx2(const AttendArgs& a);
void AttendAvx512(const AttendArgs& a);

// Byte offsets (KvLayerView::RowOffset) of the rows of positions [first, first + n) of
// `kv_head` into offsets[0, n): one division for the run, then slot by slot (a tile of 16
// positions costs one block-table lookup per block it touches instead of two divisions per
// row, which were a fifth of a long-context decode step's attention).
inline void TileRowOffsets(const AttentionShape& s, const KvLayerView& kv,
                           const int32_t* block_table, int first, int n, int kv_head,
                           int64_t* offsets) {
  int block = first / s.block_size;
  int slot = first % s.block_size;
  int64_t base = (int64_t{block_table[block]} * s.num_kv_heads + kv_head) * s.block_size;
  for (int j = 0; j < n; ++j) {
    if (slot == s.block_size) {
      slot = 0;
      base = (int64_t{block_table[++block]} * s.num_kv_heads + kv_head) * s.block_size;
    }
    offsets[j] = (base + slot++) * kv.row_bytes;
  }
}

// Prefetches the K and V rows of positions [first, first + n) of `kv_head` into L1: blocks are
// scattered, so the hardware prefetchers cannot run ahead across them, and a long-context
// decode step is bound by the latency of these reads, not by arithmetic (2x at 4,096 tokens).
// The SIMD kernels call it for the tile after the current one. Forced inline: GCC 12 deletes a
// call to a function that only prefetches (no side effects it can see) when it does not inline
// it, and did so here (objdump: no prefetch in the attention kernels) before this attribute.
__attribute__((always_inline)) inline void PrefetchKvRows(const AttentionShape& s,
                                                          const KvLayerView& kv,
                                                          const int32_t* block_table, int first,
                                                          int n, int kv_head) {
  if (n <= 0) return;
  int64_t offsets[16];
  for (int j0 = 0; j0 < n; j0 += 16) {
    const int m = n - j0 < 16 ? n - j0 : 16;
    TileRowOffsets(s, kv, block_table, first + j0, m, kv_head, offsets);
    for (int j = 0; j < m; ++j)
      for (int64_t b = 0; b < kv.row_bytes; b += 64) {
        __builtin_prefetch(kv.k + offsets[j] + b, 0, 3);
        __builtin_prefetch(kv.v + offsets[j] + b, 0, 3);
      }
  }
}

// Positions per tile of the online softmax (both levels).
inline constexpr int kTile = 16;

// Soft-caps the n scores of a tile in place (AttentionShape::softcap): the scalar reference
// (the SIMD kernels use an exp-based tanh of the same accuracy class). Called once per tile,
// only when a cap is set.
inline void SoftCapScores(float* scores, int n, float cap) {
  const float inv = 1.0f / cap;
  for (int j = 0; j < n; ++j) scores[j] = cap * std::tanh(scores[j] * inv);
}
// Most query tokens per task (a query run). How many floats of accumulators (queries x group x
// head_dim) a run holds is KernelTuning::attention_run_floats.
inline constexpr int kMaxQueryRun = 64;

}  // namespace attention_internal

}  // namespace pagellm
