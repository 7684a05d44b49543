#include "kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kernel_tuning.h"
#include "kernels/kv_quant.h"
#include "pagellm/check.h"

namespace pagellm {
namespace attention_internal {

// Reference kernel: rows decoded with DequantizeKvRow, plain loops, std::exp; each query of
// the run on its own.
void AttendScalar(const AttendArgs& a) {
  const AttentionShape& s = *a.shape;
  const KvLayerView& kv = *a.kv;
  const int group = s.num_heads / s.num_kv_heads;
  const int d = s.head_dim;
  thread_local std::vector<float> kbuf, vbuf, scores;
  kbuf.resize(static_cast<size_t>(kTile) * d);
  vbuf.resize(static_cast<size_t>(kTile) * d);
  scores.resize(static_cast<size_t>(kTile) * group);
  auto row = [&](const uint8_t* base, int p) {
    return base + kv.RowOffset(s, a.block_table, p, a.kv_head);
  };
  for (int qi = 0; qi < a.num_queries; ++qi) {
    const AttendQuery& aq = a.queries[qi];
    for (int g = 0; g < group; ++g) {
      aq.m[g] = -std::numeric_limits<float>::infinity();
      aq.l[g] = 0.0f;
      std::fill_n(aq.acc + int64_t{g} * d, d, 0.0f);
    }
    for (int j0 = a.begin; j0 < aq.end; j0 += kTile) {
      const int n = std::min(kTile, aq.end - j0);
      for (int j = 0; j < n; ++j) {
        DequantizeKvRow(kv.dtype, row(kv.k, j0 + j), d, kv.k_scale, &kbuf[j * d]);
        DequantizeKvRow(kv.dtype, row(kv.v, j0 + j), d, kv.v_scale, &vbuf[j * d]);
      }
      for (int g = 0; g < group; ++g) {
        const float* q = aq.q + int64_t{g} * d;
        float* sc = &scores[g * kTile];
        float mx = aq.m[g];
        for (int j = 0; j < n; ++j) {
          const float* k = &kbuf[j * d];
          float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          for (int x = 0; x < d; ++x) acc[x % 8] += q[x] * k[x];
          sc[j] =
              (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))) *
              s.scale;
        }
        if (s.softcap > 0.0f) SoftCapScores(sc, n, s.softcap);
        for (int j = 0; j < n; ++j) mx = std::max(mx, sc[j]);
        const float corr = std::exp(aq.m[g] - mx);  // 0 on the first tile (m = -inf)
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
        aq.l[g] = aq.l[g] * corr + sum;
        aq.m[g] = mx;
        float* o = aq.acc + int64_t{g} * d;
        for (int x = 0; x < d; ++x) o[x] *= corr;
        for (int j = 0; j < n; ++j)
          for (int x = 0; x < d; ++x) o[x] += sc[j] * vbuf[j * d + x];
      }
    }
  }
}

}  // namespace attention_internal

namespace {

using attention_internal::AttendArgs;
using attention_internal::AttendFn;
using attention_internal::AttendQuery;

// One task: tokens [first_token, first_token + num_tokens) of sequence `seq` (a query run) over
// chunk `chunk` (positions from `begin`) of KV head `kv_head`.
struct TaskRef {
  int32_t seq;
  int32_t first_token;  // index into the flattened tokens
  int32_t num_tokens;
  int32_t begin;
  int32_t chunk;
  int32_t kv_head;
};

// Tokens of a query run: one with a sliding window (each token's chunks then start at its own
// first visible position); otherwise as many as hold attention_run_floats of accumulators.
// Every token of a run shares each decoded (f16/bf16/fp8/int -> f32) and transposed K tile, so
// longer runs repeat that per-tile work less often; the run's q and accumulator rows are then
// read from L2 instead of L1, which the FMAs per row (4 x head_dim per head and tile) hide.
// Qwen2.5-1.5B shape (6 query heads of 128 per KV head), f16 cache, pp512 at depth 0 / 4096 on
// one Zen 5 core (build/bench/attention_bench): 4,096 floats (5 tokens) 79 / 87 GFLOP/s,
// 16,384 (16) 97 / 98-100, 32,768 (42) 98-102 / 102-103, 65,536 (64) 99-101 / 102-105; the
// Llama-3.2-1B shape (4 x 64, 16 tokens at 4,096 floats) 79-83 -> 85-88 at 32,768.
int QueryRunLength(const AttentionShape& s) {
  if (s.sliding_window > 0) return 1;
  const int64_t per_token = int64_t{s.num_heads} * s.head_dim / s.num_kv_heads;
  return static_cast<int>(std::clamp<int64_t>(GetKernelTuning().attention_run_floats / per_token, 1,
                                              attention_internal::kMaxQueryRun));
}

void Run(AttendFn attend, const AttentionShape& s, const float* q, const KvLayerView& kv,
         std::span<const SequenceChunk> seqs, float* out, ThreadPool* pool) {
  CHECK(s.num_heads % s.num_kv_heads == 0);
  const int group = s.num_heads / s.num_kv_heads;
  const int d = s.head_dim;
  const int64_t q_stride = int64_t{s.num_heads} * d;
  const int64_t partial_floats = int64_t{group} * (d + 2);  // m, l, acc per group head
  const int run_length = QueryRunLength(s);

  // Per token: position, first visible position, chunk count, and the first of its partial
  // slots (num_kv_heads x chunks of them; -1 with one chunk: the output is written directly).
  struct TokenInfo {
    int32_t pos;
    int32_t first;
    int32_t chunks;
    int32_t first_partial;
  };
  // Reused across calls (no allocation once warm).
  thread_local std::vector<TokenInfo> token_info;
  thread_local std::vector<TaskRef> tasks;
  thread_local std::vector<float> partials;
  token_info.clear();
  tasks.clear();
  int32_t num_partials = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (int t = 0; t < seqs[i].num_tokens; ++t) {
      const int pos = seqs[i].start_pos + t;
      const int first = s.sliding_window > 0 ? std::max(0, pos - s.sliding_window + 1) : 0;
      const int chunks = (pos - first + kAttentionChunk) / kAttentionChunk;
      token_info.push_back({pos, first, chunks, chunks > 1 ? num_partials : -1});
      if (chunks > 1) num_partials += s.num_kv_heads * chunks;
    }
  }
  int32_t seq_first = 0;  // flattened index of the sequence's first token
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (int t0 = 0; t0 < seqs[i].num_tokens; t0 += run_length) {
      const int32_t token = seq_first + t0;
      const int n = std::min(run_length, seqs[i].num_tokens - t0);
      // Tokens of a run share `first` (run_length is 1 with a window); the last sees most.
      const TokenInfo& last = token_info[token + n - 1];
      for (int c = 0; c < last.chunks; ++c) {
        const int begin = last.first + c * kAttentionChunk;
        // The run's tokens that reach this chunk: a suffix (positions ascend).
        int skip = 0;
        while (token_info[token + skip].pos < begin) ++skip;
        for (int h = 0; h < s.num_kv_heads; ++h)
          tasks.push_back({static_cast<int32_t>(i), token + skip, n - skip, begin, c, h});
      }
    }
    seq_first += seqs[i].num_tokens;
  }
  if (static_cast<int64_t>(partials.size()) < num_partials * partial_floats)
    partials.resize(num_partials * partial_floats);
  float* partial_base = partials.data();
  // Workers must not name the thread_local vectors (they would get their own): pointers only.
  const TokenInfo* info = token_info.data();
  const TaskRef* task_list = tasks.data();
  const int64_t num_tasks = static_cast<int64_t>(tasks.size());

  // Writes acc / l (back in the model basis) for one group.
  auto finish = [&](const float* acc, const float* l, float* o_group) {
    for (int g = 0; g < group; ++g) {
      const float inv = 1.0f / l[g];
      float* o = o_group + int64_t{g} * d;
      for (int x = 0; x < d; ++x) o[x] = acc[int64_t{g} * d + x] * inv;
      if (kv.rotated) HadamardRotate(o, d);
    }
  };

  auto task = [&](int64_t task_id, int) {
    thread_local std::vector<float> local, qrot;
    thread_local std::vector<AttendQuery> queries;
    const TaskRef& t = task_list[task_id];
    const bool transform_q = kv.rotated || kv.k_smooth != nullptr;
    local.resize(static_cast<size_t>(t.num_tokens) * partial_floats);
    if (transform_q) qrot.resize(static_cast<size_t>(t.num_tokens) * group * d);
    queries.resize(t.num_tokens);
    for (int i = 0; i < t.num_tokens; ++i) {
      const int tok = t.first_token + i;
      const TokenInfo& ti = info[tok];
      const float* qg = q + tok * q_stride + int64_t{t.kv_head} * group * d;
      if (transform_q) {
        // Stored K' = H((K - c) / s): q.K = (H(s * q)).K' + const (H orthonormal,
        // self-inverse).
        float* qr = qrot.data() + int64_t{i} * group * d;
        std::copy(qg, qg + int64_t{group} * d, qr);
        for (int g = 0; g < group; ++g) {
          float* qh = qr + int64_t{g} * d;
          if (kv.k_smooth != nullptr) {
            const float* sm = kv.k_smooth + int64_t{t.kv_head} * d;
            for (int x = 0; x < d; ++x) qh[x] *= sm[x];
          }
          if (kv.rotated) HadamardRotate(qh, d);
        }
        qg = qr;
      }
      float* buf =
          ti.chunks > 1
              ? partial_base +
                    (ti.first_partial + int64_t{t.kv_head} * ti.chunks + t.chunk) * partial_floats
              : local.data() + int64_t{i} * partial_floats;
      queries[i] = {qg, std::min(ti.pos + 1, t.begin + kAttentionChunk), buf, buf + group,
                    buf + 2 * group};
    }
    attend({&s, &kv, seqs[t.seq].block_table.data(), t.begin, t.kv_head, queries.data(),
            t.num_tokens});
    for (int i = 0; i < t.num_tokens; ++i) {
      const int tok = t.first_token + i;
      if (info[tok].chunks == 1)
        finish(queries[i].acc, queries[i].l, out + tok * q_stride + int64_t{t.kv_head} * group * d);
    }
  };
  if (pool != nullptr) {
    pool->Run(num_tasks, task);
  } else {
    for (int64_t i = 0; i < num_tasks; ++i) task(i, 0);
  }

  // Merge the chunks of long contexts, in chunk order: one job per (token, KV head).
  thread_local std::vector<int32_t> merge_tokens;
  merge_tokens.clear();
  for (int32_t tok = 0; tok < static_cast<int32_t>(token_info.size()); ++tok)
    if (token_info[tok].chunks > 1) merge_tokens.push_back(tok);
  const int32_t* merge_list = merge_tokens.data();
  const int64_t num_merges = static_cast<int64_t>(merge_tokens.size()) * s.num_kv_heads;
  auto merge = [&](int64_t mi, int) {
    thread_local std::vector<float> acc, l;
    const int32_t tok = merge_list[mi / s.num_kv_heads];
    const int kv_head = static_cast<int>(mi % s.num_kv_heads);
    const TokenInfo& ti = info[tok];
    const int64_t first = ti.first_partial + int64_t{kv_head} * ti.chunks;
    acc.assign(static_cast<size_t>(group) * d, 0.0f);
    l.assign(group, 0.0f);
    for (int g = 0; g < group; ++g) {
      float mx = -std::numeric_limits<float>::infinity();
      for (int c = 0; c < ti.chunks; ++c)
        mx = std::max(mx, partial_base[(first + c) * partial_floats + g]);
      for (int c = 0; c < ti.chunks; ++c) {
        const float* p = partial_base + (first + c) * partial_floats;
        const float w = std::exp(p[g] - mx);
        l[g] += p[group + g] * w;
        const float* pa = p + 2 * group + int64_t{g} * d;
        for (int x = 0; x < d; ++x) acc[int64_t{g} * d + x] += pa[x] * w;
      }
    }
    finish(acc.data(), l.data(), out + tok * q_stride + int64_t{kv_head} * group * d);
  };
  if (pool != nullptr) {
    pool->Run(num_merges, merge);
  } else {
    for (int64_t i = 0; i < num_merges; ++i) merge(i, 0);
  }
}

}  // namespace

KvLayerView FloatKvView(const AttentionShape& shape, const float* k_cache, const float* v_cache) {
  KvLayerView v;
  v.dtype = KvCacheDtype::kFloat32;
  v.k = reinterpret_cast<const uint8_t*>(k_cache);
  v.v = reinterpret_cast<const uint8_t*>(v_cache);
  v.row_bytes = int64_t{shape.head_dim} * 4;
  return v;
}

void PagedAttentionAt(SimdLevel level, const AttentionShape& shape, const float* q,
                      const KvLayerView& kv, std::span<const SequenceChunk> seqs, float* out,
                      ThreadPool* pool) {
  AttendFn attend = attention_internal::AttendScalar;
  if (level == SimdLevel::kAvx512) attend = attention_internal::AttendAvx512;
  if (level == SimdLevel::kAvx2) attend = attention_internal::AttendAvx2;
  Run(attend, shape, q, kv, seqs, out, pool);
}

void PagedAttention(const AttentionShape& shape, const float* q, const KvLayerView& kv,
                    std::span<const SequenceChunk> seqs, float* out, ThreadPool* pool) {
  PagedAttentionAt(ActiveSimdLevel(), shape, q, kv, seqs, out, pool);
}

void PagedAttention(const AttentionShape& shape, const float* q, const float* k_cache,
                    const float* v_cache, std::span<const SequenceChunk> seqs, float* out,
                    ThreadPool* pool) {
  PagedAttention(shape, q, FloatKvView(shape, k_cache, v_cache), seqs, out, pool);
}

void PagedAttentionScalar(const AttentionShape& shape, const float* q, const float* k_cache,
                          const float* v_cache, std::span<const SequenceChunk> seqs, float* out,
                          ThreadPool* pool) {
  PagedAttentionAt(SimdLevel::kScalar, shape, q, FloatKvView(shape, k_cache, v_cache), seqs, out,
                   pool);
}

}  // namespace pagellm
