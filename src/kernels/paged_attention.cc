#include "kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kv_quant.h"
#include "pagellm/check.h"

namespace pagellm {
namespace attention_internal {

// Reference kernel: rows decoded with DequantizeKvRow, plain loops, std::exp.
void AttendScalar(const AttendArgs& a) {
  const AttentionShape& s = *a.shape;
  const KvLayerView& kv = *a.kv;
  const int group = s.num_heads / s.num_kv_heads;
  const int d = s.head_dim;
  thread_local std::vector<float> kbuf, vbuf, scores;
  kbuf.resize(static_cast<size_t>(kTile) * d);
  vbuf.resize(static_cast<size_t>(kTile) * d);
  scores.resize(static_cast<size_t>(kTile) * group);
  for (int g = 0; g < group; ++g) {
    a.m[g] = -std::numeric_limits<float>::infinity();
    a.l[g] = 0.0f;
    std::fill_n(a.acc + int64_t{g} * d, d, 0.0f);
  }
  auto row = [&](const uint8_t* base, int p) {
    return base + kv.RowOffset(s, a.block_table, p, a.kv_head);
  };
  for (int j0 = a.begin; j0 < a.end; j0 += kTile) {
    const int n = std::min(kTile, a.end - j0);
    for (int j = 0; j < n; ++j) {
      DequantizeKvRow(kv.dtype, row(kv.k, j0 + j), d, kv.k_scale, &kbuf[j * d]);
      DequantizeKvRow(kv.dtype, row(kv.v, j0 + j), d, kv.v_scale, &vbuf[j * d]);
    }
    for (int g = 0; g < group; ++g) {
      const float* q = a.q + int64_t{g} * d;
      float* sc = &scores[g * kTile];
      float mx = a.m[g];
      for (int j = 0; j < n; ++j) {
        const float* k = &kbuf[j * d];
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int x = 0; x < d; ++x) acc[x % 8] += q[x] * k[x];
        sc[j] =
            (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))) *
            s.scale;
        mx = std::max(mx, sc[j]);
      }
      const float corr = std::exp(a.m[g] - mx);  // 0 on the first tile (m = -inf)
      float sum = 0.0f;
      for (int j = 0; j < n; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
      a.l[g] = a.l[g] * corr + sum;
      a.m[g] = mx;
      float* o = a.acc + int64_t{g} * d;
      for (int x = 0; x < d; ++x) o[x] *= corr;
      for (int j = 0; j < n; ++j)
        for (int x = 0; x < d; ++x) o[x] += sc[j] * vbuf[j * d + x];
    }
  }
}

}  // namespace attention_internal

namespace {

using attention_internal::AttendArgs;
using attention_internal::AttendFn;

struct TaskRef {
  int32_t token;  // index into the flattened tokens
  int32_t seq;
  int32_t begin;  // positions [begin, end)
  int32_t end;
  int32_t kv_head;
  int32_t partial;  // -1: the token has one chunk, write the output directly
};

void Run(AttendFn attend, const AttentionShape& s, const float* q, const KvLayerView& kv,
         std::span<const SequenceChunk> seqs, float* out, ThreadPool* pool) {
  CHECK(s.num_heads % s.num_kv_heads == 0);
  const int group = s.num_heads / s.num_kv_heads;
  const int d = s.head_dim;
  const int64_t q_stride = int64_t{s.num_heads} * d;
  const int64_t partial_floats = int64_t{group} * (d + 2);  // m, l, acc per group head

  // Tasks: (token, chunk, kv head). Reused across calls (no allocation once warm).
  thread_local std::vector<TaskRef> tasks;
  struct Merge {
    int32_t token;
    int32_t kv_head;
    int32_t first_partial;
    int32_t num_chunks;
  };
  thread_local std::vector<Merge> merges;
  thread_local std::vector<float> partials;
  tasks.clear();
  merges.clear();
  int32_t token = 0, num_partials = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (int t = 0; t < seqs[i].num_tokens; ++t, ++token) {
      const int pos = seqs[i].start_pos + t;
      const int first = s.sliding_window > 0 ? std::max(0, pos - s.sliding_window + 1) : 0;
      const int chunks = (pos - first + kAttentionChunk) / kAttentionChunk;
      for (int h = 0; h < s.num_kv_heads; ++h) {
        if (chunks > 1) merges.push_back({token, h, num_partials, chunks});
        for (int c = 0; c < chunks; ++c) {
          const int b = first + c * kAttentionChunk;
          tasks.push_back({token, static_cast<int32_t>(i), b,
                           std::min(pos + 1, b + kAttentionChunk), h,
                           chunks > 1 ? num_partials++ : -1});
        }
      }
    }
  }
  if (static_cast<int64_t>(partials.size()) < num_partials * partial_floats)
    partials.resize(num_partials * partial_floats);
  float* partial_base = partials.data();
  // Workers must not name the thread_local vectors (they would get their own): pointers only.
  const TaskRef* task_list = tasks.data();
  const Merge* merge_list = merges.data();
  const int64_t num_tasks = static_cast<int64_t>(tasks.size());
  const int64_t num_merges = static_cast<int64_t>(merges.size());

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
    const TaskRef& t = task_list[task_id];
    const float* qg = q + t.token * q_stride + int64_t{t.kv_head} * group * d;
    if (kv.rotated || kv.k_smooth != nullptr) {
      // Stored K' = H((K - c) / s): q.K = (H(s * q)).K' + const (H orthonormal, self-inverse).
      qrot.assign(qg, qg + int64_t{group} * d);
      for (int g = 0; g < group; ++g) {
        float* qr = qrot.data() + int64_t{g} * d;
        if (kv.k_smooth != nullptr) {
          const float* sm = kv.k_smooth + int64_t{t.kv_head} * d;
          for (int x = 0; x < d; ++x) qr[x] *= sm[x];
        }
        if (kv.rotated) HadamardRotate(qr, d);
      }
      qg = qrot.data();
    }
    float* buf;
    if (t.partial >= 0) {
      buf = partial_base + t.partial * partial_floats;
    } else {
      local.resize(partial_floats);
      buf = local.data();
    }
    AttendArgs a{&s,          &kv,
                 qg,          seqs[t.seq].block_table.data(),
                 t.begin,     t.end,
                 t.kv_head,   buf,
                 buf + group, buf + 2 * group};
    attend(a);
    if (t.partial < 0)
      finish(a.acc, a.l, out + t.token * q_stride + int64_t{t.kv_head} * group * d);
  };
  if (pool != nullptr) {
    pool->Run(num_tasks, task);
  } else {
    for (int64_t i = 0; i < num_tasks; ++i) task(i, 0);
  }

  // Merge the chunks of long contexts, in chunk order.
  auto merge = [&](int64_t mi, int) {
    thread_local std::vector<float> acc, l;
    const Merge& mg = merge_list[mi];
    acc.assign(static_cast<size_t>(group) * d, 0.0f);
    l.assign(group, 0.0f);
    for (int g = 0; g < group; ++g) {
      float mx = -std::numeric_limits<float>::infinity();
      for (int c = 0; c < mg.num_chunks; ++c)
        mx = std::max(mx, partial_base[(mg.first_partial + c) * partial_floats + g]);
      for (int c = 0; c < mg.num_chunks; ++c) {
        const float* p = partial_base + (mg.first_partial + c) * partial_floats;
        const float w = std::exp(p[g] - mx);
        l[g] += p[group + g] * w;
        const float* pa = p + 2 * group + int64_t{g} * d;
        for (int x = 0; x < d; ++x) acc[int64_t{g} * d + x] += pa[x] * w;
      }
    }
    finish(acc.data(), l.data(), out + mg.token * q_stride + int64_t{mg.kv_head} * group * d);
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
  Run(level == SimdLevel::kAvx512 ? attention_internal::AttendAvx512
                                  : attention_internal::AttendScalar,
      shape, q, kv, seqs, out, pool);
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
