#include "model/tensor_parallel_shard.h"

#include <algorithm>
#include <cstring>

#include "fmt/format.h"
#include "model/gguf_file.h"
#include "model/safetensors_file.h"

namespace pagellm {
namespace {

// Rows [begin, begin + count) of `w`: a view into the same bytes.
WeightMatrix RowSlice(const WeightMatrix& w, int64_t begin, int64_t count) {
  WeightMatrix s;
  s.dtype = w.dtype;
  s.rows = count;
  s.cols = w.cols;
  s.data = w.data + begin * w.row_bytes();
  s.input_perm = w.input_perm;
  return s;
}

// Rank `rank`'s [begin, count) of n split in shares of ceil(n / size).
void Share(int64_t n, int rank, int size, int64_t* begin, int64_t* count) {
  const int64_t per = (n + size - 1) / size;
  *begin = std::min(n, per * rank);
  *count = std::min(n, *begin + per) - *begin;
}

// Stored columns [begin, begin + count) of `w` (whole quantization blocks), copied into `store`
// (each row's bytes of those columns), without an input permutation.
WeightMatrix CopyColumns(const WeightMatrix& w, int64_t begin, int64_t count, WeightStore* store) {
  WeightMatrix s;
  s.dtype = w.dtype;
  s.rows = w.rows;
  s.cols = count;
  const int64_t offset = DTypeRowBytes(w.dtype, begin), row = s.row_bytes();
  uint8_t* data = store->Allocate(s.nbytes());
  for (int64_t r = 0; r < w.rows; ++r) std::memcpy(data + r * row, w.row(r) + offset, row);
  s.data = data;
  return s;
}

// Columns [begin, begin + count) of `w`, copied. The range must cover whole quantization
// blocks, and `w` must have no input permutation (RowParallelSlice splits those).
StatusOr<WeightMatrix> ColumnSlice(const WeightMatrix& w, int64_t begin, int64_t count,
                                   const char* what, WeightStore* store) {
  const int64_t block = DTypeBlockElems(w.dtype);
  if (w.input_perm != nullptr)
    return UnimplementedError(fmt::format(
        "tensor parallelism: {} has an input permutation (GPTQ act-order); the experts of an "
        "act-order mixture-of-experts checkpoint are not split (dense layers are)",
        what));
  if (begin % block != 0 || count % block != 0)
    return UnimplementedError(
        fmt::format("tensor parallelism: {} columns [{}, {}) cut {}-element quantization blocks "
                    "of {}; choose a smaller --tensor-parallel-size",
                    what, begin, begin + count, block, DTypeName(w.dtype)));
  return CopyColumns(w, begin, count, store);
}

// A dense layer's row-parallel matrix (o_proj, down_proj): rank l.rank's input columns
// [begin, begin + count), or, for a GPTQ act-order matrix, its share of the stored blocks.
// An act-order matrix stores its inputs sorted by group (WeightMatrix::input_perm), so the
// inputs of one rank are scattered over the stored blocks, and a block (one activation scale
// in the kernels, one group's scale and zero) mixes the inputs of several ranks. Each rank
// therefore takes ceil(blocks / size) whole stored blocks, with their permutation entries,
// and multiplies the whole input, which the ranks sum together first (zeros outside each
// rank's columns; TensorParallelOps::MatMul): every block is computed as on one rank, and the
// ranks' partial sums add up to the whole product as in any other row-parallel split.
StatusOr<WeightMatrix> RowParallelSlice(const WeightMatrix& w, const ShardLayout& l, int64_t begin,
                                        int64_t count, const char* what, WeightStore* store) {
  if (w.input_perm == nullptr) return ColumnSlice(w, begin, count, what, store);
  const int64_t block = DTypeBlockElems(w.dtype);
  int64_t b0 = 0, bn = 0;
  Share(w.cols / block, l.rank, l.size, &b0, &bn);
  if (bn == 0)
    return UnimplementedError(fmt::format(
        "tensor parallelism: {} (GPTQ act-order) has {} stored blocks of {} inputs, fewer than "
        "the {} ranks; choose a smaller --tensor-parallel-size",
        what, w.cols / block, block, l.size));
  WeightMatrix s = CopyColumns(w, b0 * block, bn * block, store);
  s.input_perm = reinterpret_cast<const int32_t*>(
      store->Intern(reinterpret_cast<const uint8_t*>(w.input_perm + b0 * block), 4 * bn * block));
  s.input_cols = w.cols;
  return s;
}

std::vector<float> Slice(const std::vector<float>& v, int64_t begin, int64_t count) {
  if (v.empty()) return {};
  return std::vector<float>(v.begin() + begin, v.begin() + begin + count);
}

// Rank `l.rank`'s part of a sparse layer's experts: its share of every expert's intermediate
// columns (gate/up rows, down input columns) and of the shared expert's; the router and the
// shared expert's gate whole. Nothing for a dense layer.
Status ShardExperts(const MoeWeights& f, const ShardLayout& l, const std::string& layer,
                    WeightStore* store, MoeWeights* s) {
  if (f.gate.empty()) return Status::Ok();
  s->router = f.router;
  for (size_t e = 0; e < f.gate.size(); ++e) {
    s->gate.push_back(RowSlice(f.gate[e], l.expert_inter_begin, l.expert_inter));
    s->up.push_back(RowSlice(f.up[e], l.expert_inter_begin, l.expert_inter));
    ASSIGN_OR_RETURN(WeightMatrix down,
                     ColumnSlice(f.down[e], l.expert_inter_begin, l.expert_inter,
                                 fmt::format("{}expert {} down_proj", layer, e).c_str(), store));
    s->down.push_back(down);
  }
  if (f.shared_expert_gate.empty()) return Status::Ok();
  s->shared_gate = RowSlice(f.shared_gate, l.shared_inter_begin, l.shared_inter);
  s->shared_up = RowSlice(f.shared_up, l.shared_inter_begin, l.shared_inter);
  ASSIGN_OR_RETURN(s->shared_down, ColumnSlice(f.shared_down, l.shared_inter_begin, l.shared_inter,
                                               (layer + "shared_expert down_proj").c_str(), store));
  s->shared_expert_gate = f.shared_expert_gate;
  return Status::Ok();
}

}  // namespace

StatusOr<ShardLayout> ComputeShardLayout(const ModelConfig& c, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size)
    return InvalidArgumentError(fmt::format("rank {} of a group of {}", rank, size));
  if (c.num_heads % size != 0)
    return InvalidArgumentError(fmt::format(
        "--tensor-parallel-size {}: the model's {} attention heads are not divisible by it", size,
        c.num_heads));
  if (c.num_kv_heads % size != 0 && size % c.num_kv_heads != 0)
    return InvalidArgumentError(fmt::format(
        "--tensor-parallel-size {}: the model's {} KV heads can neither be split evenly nor "
        "replicated evenly across it",
        size, c.num_kv_heads));
  ShardLayout l;
  l.rank = rank;
  l.size = size;
  l.num_q_heads = c.num_heads / size;
  l.q_head_begin = rank * l.num_q_heads;
  if (c.num_kv_heads >= size) {
    l.num_kv_heads = c.num_kv_heads / size;
    l.kv_head_begin = rank * l.num_kv_heads;
  } else {
    // Replicated: the one KV head this rank's query heads read (size / num_kv_heads ranks
    // hold each).
    l.num_kv_heads = 1;
    l.kv_head_begin = rank / (size / c.num_kv_heads);
  }
  // The shares are checked on the last rank, whose ceil share is the smallest, so that every
  // rank of the group gives the same answer (a rank's ops hold every rank's layout).
  const int last = size - 1;
  auto last_has_none = [&](int64_t n) {
    int64_t begin = 0, count = 0;
    Share(n, last, size, &begin, &count);
    return count == 0;
  };
  if (last_has_none(c.intermediate_size) || last_has_none(c.vocab_size))
    return InvalidArgumentError(fmt::format(
        "--tensor-parallel-size {} leaves rank {} no MLP columns or vocabulary rows", size, last));
  Share(c.intermediate_size, rank, size, &l.inter_begin, &l.inter);
  Share(c.vocab_size, rank, size, &l.vocab_begin, &l.vocab);
  const MoeConfig& m = c.moe;
  if (m.num_experts > 0) {
    if (last_has_none(m.expert_intermediate))
      return InvalidArgumentError(fmt::format(
          "--tensor-parallel-size {} leaves rank {} none of each expert's {} intermediate columns",
          size, last, m.expert_intermediate));
    Share(m.expert_intermediate, rank, size, &l.expert_inter_begin, &l.expert_inter);
    if (m.shared_expert_intermediate > 0) {
      if (last_has_none(m.shared_expert_intermediate))
        return InvalidArgumentError(fmt::format(
            "--tensor-parallel-size {} leaves rank {} none of the shared expert's {} intermediate "
            "columns",
            size, last, m.shared_expert_intermediate));
      Share(m.shared_expert_intermediate, rank, size, &l.shared_inter_begin, &l.shared_inter);
    }
  }
  return l;
}

StatusOr<std::unique_ptr<LoadedModel>> ShardModel(const LoadedModel& full, const ShardLayout& l) {
  const ModelConfig& c = full.config;
  auto shard = std::make_unique<LoadedModel>();
  shard->path = full.path;
  shard->format = full.format;
  shard->generation_defaults = full.generation_defaults;
  shard->quantization = full.quantization;
  ModelConfig& sc = shard->config;
  sc = c;
  sc.num_heads = l.num_q_heads;
  sc.num_kv_heads = l.num_kv_heads;
  sc.intermediate_size = static_cast<int>(l.inter);
  sc.vocab_size = static_cast<int>(l.vocab);
  if (c.moe.num_experts > 0) {
    sc.moe.expert_intermediate = static_cast<int>(l.expert_inter);
    if (c.moe.shared_expert_intermediate > 0)
      sc.moe.shared_expert_intermediate = static_cast<int>(l.shared_inter);
  }

  const int64_t hd = c.head_dim;
  const int64_t q0 = l.q_head_begin * hd, qn = sc.q_dim();
  const int64_t kv0 = l.kv_head_begin * hd, kvn = sc.kv_dim();
  const ModelWeights& fw = full.weights;
  ModelWeights& w = shard->weights;
  WeightStore* store = &shard->repacked;
  // A pipeline stage (model/pipeline_stage.h) may hold neither table, and some of the layers.
  if (fw.embed.data != nullptr) w.embed = RowSlice(fw.embed, l.vocab_begin, l.vocab);
  if (fw.lm_head.data != nullptr) w.lm_head = RowSlice(fw.lm_head, l.vocab_begin, l.vocab);
  w.final_norm = fw.final_norm;
  w.layer_begin = fw.layer_begin;
  for (size_t i = 0; i < fw.layers.size(); ++i) {
    const LayerWeights& f = fw.layers[i];
    LayerWeights s;
    const std::string layer = fmt::format("layer {} ", fw.layer_begin + i);
    s.attn_norm = f.attn_norm;
    s.wq = RowSlice(f.wq, q0, qn);
    s.wk = RowSlice(f.wk, kv0, kvn);
    s.wv = RowSlice(f.wv, kv0, kvn);
    ASSIGN_OR_RETURN(s.wo, RowParallelSlice(f.wo, l, q0, qn, (layer + "o_proj").c_str(), store));
    s.bq = Slice(f.bq, q0, qn);
    s.bk = Slice(f.bk, kv0, kvn);
    s.bv = Slice(f.bv, kv0, kvn);
    s.q_norm = f.q_norm;
    s.k_norm = f.k_norm;
    s.ffn_norm = f.ffn_norm;
    s.post_attn_norm = f.post_attn_norm;  // Gemma: norms of the replicated residual stream
    s.post_ffn_norm = f.post_ffn_norm;
    if (f.w_down.data != nullptr) {  // a dense layer (sparse ones have only experts)
      s.w_gate = RowSlice(f.w_gate, l.inter_begin, l.inter);
      s.w_up = RowSlice(f.w_up, l.inter_begin, l.inter);
      ASSIGN_OR_RETURN(s.w_down, RowParallelSlice(f.w_down, l, l.inter_begin, l.inter,
                                                  (layer + "down_proj").c_str(), store));
    }
    RETURN_IF_ERROR(ShardExperts(f.moe, l, layer, store, &s.moe));
    s.kv_k_scale = f.kv_k_scale;
    s.kv_v_scale = f.kv_v_scale;
    w.layers.push_back(std::move(s));
  }
  int64_t bytes = w.embed.nbytes() + (c.tie_word_embeddings ? 0 : w.lm_head.nbytes());
  for (const LayerWeights& s : w.layers) {
    for (const WeightMatrix* m :
         {&s.wq, &s.wk, &s.wv, &s.wo, &s.w_gate, &s.w_up, &s.w_down, &s.moe.router,
          &s.moe.shared_gate, &s.moe.shared_up, &s.moe.shared_down})
      bytes += m->nbytes();
    for (const std::vector<WeightMatrix>* experts : {&s.moe.gate, &s.moe.up, &s.moe.down})
      for (const WeightMatrix& m : *experts) bytes += m.nbytes();
  }
  w.total_bytes = bytes;
  return shard;
}

}  // namespace pagellm
