#include "eval/evaluator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>

#include "backend/backend_factory.h"
#include "base/kv_cache_dtype.h"
#include "engine/kv_calibration.h"
#include "engine/model_session.h"
#include "eval/distribution_stats.h"
#include "eval/documents.h"
#include "fmt/format.h"
#include "kv/kv_cache_storage.h"

namespace pagellm {
namespace {

// Logits of one forward batch are [tokens][vocab] float32; keep them under this size.
constexpr int64_t kMaxLogitBytesPerBatch = int64_t{256} << 20;
constexpr int32_t kDefaultBatchTokens = 4096;

int32_t CeilDiv(int64_t a, int64_t b) {
  return static_cast<int32_t>((a + b - 1) / b);
}

}  // namespace

double PerplexityResult::perplexity() const {
  return std::exp(mean_nll());
}

double KlResult::perplexity_change() const {
  const double ref = reference.perplexity();
  return ref > 0 ? candidate.perplexity() / ref - 1.0 : 0.0;
}

// One KV cache (in one dtype) and the CPU backend that reads and writes it.
class Evaluator::Pass {
 public:
  static StatusOr<std::unique_ptr<Pass>> Create(const LoadedModel& model,
                                                const Tokenizer& tokenizer, const EngineConfig& c,
                                                ThreadPool* pool, int32_t num_blocks,
                                                int32_t max_positions) {
    std::unique_ptr<Pass> p(new Pass());
    const ModelConfig& mc = model.config;
    // The cache layout EngineCore builds for the same flags: --kv-cache-dtype ("auto" = the
    // model dtype), --kv-cache-dtype-skip-layers and --calculate-kv-scales.
    ASSIGN_OR_RETURN(KvElementFormat format,
                     ResolveKvCacheFormat(c.kv_cache_dtype, mc.weight_dtype,
                                          c.kv_cache_dtype_skip_layers, mc.num_layers));
    KvCacheShape shape;
    shape.num_layers = mc.num_layers;
    shape.num_kv_heads = mc.num_kv_heads;
    shape.head_dim = mc.head_dim;
    shape.block_size = c.block_size;
    shape.num_blocks = num_blocks;
    shape.dtype = format.storage_dtype;
    shape.skip_layers = format.skip_layers;
    shape.skip_dtype = format.skip_dtype;
    BackendOptions options(pool, max_positions);
    const bool split = c.tensor_parallel_size * c.pipeline_parallel_size > 1;
    options.tensor_parallel_group = split ? c.tensor_parallel_group : nullptr;
    options.pipeline.pipeline_parallel_size = c.pipeline_parallel_size;
    options.pipeline.layer_partition = c.pipeline_layer_partition;
    ASSIGN_OR_RETURN(p->backend_, CreateBackend(model, options));
    RETURN_IF_ERROR(p->backend_->AllocateKvCache(shape, /*num_swap_blocks=*/0));
    // The same start-up calibration (K smoothing, fp8 scales) as EngineCore::Create.
    RETURN_IF_ERROR(CalibrateKvCache(model, tokenizer, c.max_model_len, c.calculate_kv_scales,
                                     p->backend_.get(), pool));
    return p;
  }
  Status Forward(const ForwardBatch& batch) { return backend_->Forward(batch, &out_); }
  const ForwardOutput& out() const { return out_; }

 private:
  Pass() = default;
  std::unique_ptr<Backend> backend_;  // owns the pass's KV cache
  ForwardOutput out_;
};

struct Evaluator::Plan {
  std::vector<ScoringWindow> windows;
  std::vector<ScoringBatch> batches;
  int32_t max_length = 0;
  int32_t batch_tokens = 0;
  int32_t num_blocks = 0;  // enough for the largest batch, + the null block 0
  int64_t documents = 0;
};

Evaluator::~Evaluator() = default;

StatusOr<std::unique_ptr<Evaluator>> Evaluator::Create(const EngineConfig& config) {
  std::unique_ptr<Evaluator> e(new Evaluator());
  e->config_ = config;
  ASSIGN_OR_RETURN(e->model_, LoadModel(config.model, LoadOptions{config.float_matrix_dtype,
                                                                  config.quantization}));
  ASSIGN_OR_RETURN(e->tokenizer_, LoadTokenizerForModel(*e->model_));
  EngineConfig& c = e->config_;
  if (c.max_model_len <= 0) c.max_model_len = e->model_->config.max_position_embeddings;
  if (c.max_model_len < 2)
    return InvalidArgumentError(fmt::format("max_model_len {} is too short", c.max_model_len));
  if (c.block_size < 1 || c.block_size > 256)
    return InvalidArgumentError(
        fmt::format("--block-size must be in [1, 256], got {}", c.block_size));
  e->pool_ = std::make_unique<ThreadPool>(c.threads);
  return e;
}

std::string Evaluator::kv_cache_dtype_name() const {
  return std::string(KvCacheDtypeName(config_.kv_cache_dtype));
}

std::string Evaluator::kv_cache_storage_name() const {
  auto f = ResolveKvCacheFormat(config_.kv_cache_dtype, model_->config.weight_dtype,
                                config_.kv_cache_dtype_skip_layers, model_->config.num_layers);
  return f.ok() ? std::string(KvCacheDtypeName(f->storage_dtype)) : "?";
}

std::vector<std::vector<int32_t>> Evaluator::TokenizeText(const std::string& text,
                                                          int32_t max_documents) const {
  std::vector<std::string> docs = SplitDocuments(text);
  if (max_documents > 0 && static_cast<int32_t>(docs.size()) > max_documents)
    docs.resize(max_documents);
  std::vector<std::vector<int32_t>> out;
  out.reserve(docs.size());
  const int32_t bos = tokenizer_->bos_id();
  for (const std::string& d : docs) {
    std::vector<int32_t> ids = tokenizer_->Encode(d, /*add_special=*/true, /*parse_special=*/false);
    if (bos >= 0 && (ids.empty() || ids[0] != bos)) ids.insert(ids.begin(), bos);
    out.push_back(std::move(ids));
  }
  return out;
}

StatusOr<Evaluator::Plan> Evaluator::MakePlan(const std::vector<std::vector<int32_t>>& docs,
                                              const EvalOptions& o) const {
  Plan p;
  p.max_length = o.max_length > 0 ? o.max_length : config_.max_model_len;
  if (p.max_length < 2 || p.max_length > config_.max_model_len)
    return InvalidArgumentError(
        fmt::format("--max-length must be in [2, {}] (max_model_len), got {}",
                    config_.max_model_len, p.max_length));
  const int32_t stride = o.stride > 0 ? o.stride : std::max(1, p.max_length / 2);
  if (stride > p.max_length)
    return InvalidArgumentError(
        fmt::format("--stride {} exceeds --max-length {}", stride, p.max_length));
  const int64_t vocab = model_->config.vocab_size;
  p.batch_tokens = o.batch_tokens > 0
                       ? o.batch_tokens
                       : static_cast<int32_t>(std::clamp<int64_t>(
                             kMaxLogitBytesPerBatch / (vocab * int64_t{sizeof(float)}), 16,
                             kDefaultBatchTokens));
  const int64_t num_docs =
      o.max_documents > 0 ? std::min<int64_t>(o.max_documents, docs.size()) : docs.size();
  p.documents = num_docs;
  for (int64_t d = 0; d < num_docs; ++d) {
    std::vector<ScoringWindow> w = PlanScoringWindows(
        static_cast<int32_t>(d), static_cast<int32_t>(docs[d].size()), p.max_length, stride);
    p.windows.insert(p.windows.end(), w.begin(), w.end());
  }
  p.batches = PackScoringBatches(p.windows, p.batch_tokens);
  const int32_t bs = config_.block_size;
  for (const ScoringBatch& b : p.batches) {
    int32_t blocks = 0;
    for (int32_t i = b.first; i < b.first + b.count; ++i)
      blocks += CeilDiv(p.windows[i].length(), bs);
    p.num_blocks = std::max(p.num_blocks, blocks + 1);
  }
  p.num_blocks = std::max(p.num_blocks, 2);
  return p;
}

Status Evaluator::Run(const std::vector<std::vector<int32_t>>& docs, const Plan& plan,
                      Pass& candidate, Pass* reference, KlResult* result) {
  const auto t0 = std::chrono::steady_clock::now();
  const int32_t vocab = model_->config.vocab_size;
  const int32_t bs = config_.block_size;
  result->candidate.documents = result->reference.documents = plan.documents;
  result->candidate.windows = result->reference.windows = static_cast<int64_t>(plan.windows.size());
  result->candidate.per_document.assign(plan.documents, DocumentScore{});
  result->reference.per_document.assign(plan.documents, DocumentScore{});

  // A scored position: logits row `row` of the last forward predicts `target` of document `doc`.
  struct RowJob {
    int32_t row;
    int32_t target;
    int32_t doc;
  };
  struct RowScore {
    double nll = 0, ref_nll = 0, kl = 0;
    bool agree = false;
  };
  std::vector<RowJob> jobs;
  std::vector<RowScore> scores;
  std::vector<std::vector<int32_t>> tables;
  ForwardBatch batch;

  // Adds the targets predicted by rows [0, num_rows) of one sequence's logits, whose row j is
  // window token first_rel + j (window-relative), predicting token first_rel + j + 1.
  auto add_jobs = [&](const ScoringWindow& w, int32_t first_row, int32_t first_rel,
                      int32_t num_rows) {
    const std::vector<int32_t>& ids = docs[w.doc];
    for (int32_t j = 0; j < num_rows; ++j) {
      const int32_t t = w.begin + first_rel + j + 1;  // absolute target index
      if (t < w.first_target || t >= w.end) continue;
      jobs.push_back({first_row + j, ids[t], w.doc});
    }
  };
  auto forward_and_score = [&]() -> Status {
    RETURN_IF_ERROR(candidate.Forward(batch));
    if (reference != nullptr) RETURN_IF_ERROR(reference->Forward(batch));
    scores.assign(jobs.size(), RowScore{});
    pool_->ParallelFor(static_cast<int64_t>(jobs.size()), 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const RowJob& job = jobs[i];
        std::span<const float> q(candidate.out().row(job.row), vocab);
        const double q_lse = LogSumExp(q);
        RowScore& s = scores[i];
        s.nll = q_lse - q[job.target];
        if (reference != nullptr) {
          std::span<const float> p(reference->out().row(job.row), vocab);
          const double p_lse = LogSumExp(p);
          s.ref_nll = p_lse - p[job.target];
          s.kl = KlDivergence(p, p_lse, q, q_lse);
          s.agree = ArgMax(p) == ArgMax(q);
        }
      }
    });
    // Summed in job order, so the result does not depend on the thread count.
    for (size_t i = 0; i < jobs.size(); ++i) {
      const RowScore& s = scores[i];
      DocumentScore& dc = result->candidate.per_document[jobs[i].doc];
      ++dc.tokens;
      dc.nll_sum += s.nll;
      ++result->candidate.tokens;
      result->candidate.nll_sum += s.nll;
      if (reference != nullptr) {
        DocumentScore& dr = result->reference.per_document[jobs[i].doc];
        ++dr.tokens;
        dr.nll_sum += s.ref_nll;
        ++result->reference.tokens;
        result->reference.nll_sum += s.ref_nll;
        ++result->positions;
        result->kl_sum += s.kl;
        result->kl_max = std::max(result->kl_max, s.kl);
        result->top1_agree += s.agree ? 1 : 0;
      }
    }
    return Status::Ok();
  };

  for (const ScoringBatch& b : plan.batches) {
    // Block tables: consecutive block ids from 1 for the windows of this batch.
    tables.assign(b.count, {});
    int32_t next_block = 1;
    for (int32_t i = 0; i < b.count; ++i) {
      const int32_t n = CeilDiv(plan.windows[b.first + i].length(), bs);
      for (int32_t k = 0; k < n; ++k) tables[i].push_back(next_block++);
    }
    if (b.count == 1 && b.num_tokens > plan.batch_tokens) {
      // A window longer than the batch: prefill it in chunks, each scoring its own rows.
      const ScoringWindow& w = plan.windows[b.first];
      const std::vector<int32_t>& ids = docs[w.doc];
      for (int32_t start = 0; start < w.length(); start += plan.batch_tokens) {
        const int32_t n = std::min(plan.batch_tokens, w.length() - start);
        batch.token_ids.assign(ids.begin() + w.begin + start, ids.begin() + w.begin + start + n);
        batch.seqs = {SequenceChunk{n, start, tables[0], /*all_logits=*/true}};
        jobs.clear();
        add_jobs(w, 0, start, n);
        RETURN_IF_ERROR(forward_and_score());
      }
      continue;
    }
    batch.token_ids.clear();
    batch.seqs.clear();
    jobs.clear();
    int32_t row = 0;
    for (int32_t i = 0; i < b.count; ++i) {
      const ScoringWindow& w = plan.windows[b.first + i];
      const std::vector<int32_t>& ids = docs[w.doc];
      batch.token_ids.insert(batch.token_ids.end(), ids.begin() + w.begin, ids.begin() + w.end);
      batch.seqs.push_back(SequenceChunk{w.length(), 0, tables[i], /*all_logits=*/true});
      add_jobs(w, row, 0, w.length());
      row += w.length();
    }
    RETURN_IF_ERROR(forward_and_score());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  result->candidate.seconds = result->reference.seconds = secs;
  return Status::Ok();
}

StatusOr<PerplexityResult> Evaluator::Perplexity(const std::vector<std::vector<int32_t>>& docs,
                                                 const EvalOptions& options) {
  ASSIGN_OR_RETURN(Plan plan, MakePlan(docs, options));
  ASSIGN_OR_RETURN(
      std::unique_ptr<Pass> pass,
      Pass::Create(*model_, *tokenizer_, config_, pool_.get(), plan.num_blocks, plan.max_length));
  KlResult r;
  RETURN_IF_ERROR(Run(docs, plan, *pass, nullptr, &r));
  return std::move(r.candidate);
}

StatusOr<KlResult> Evaluator::CompareWithModelDtype(const std::vector<std::vector<int32_t>>& docs,
                                                    const EvalOptions& options) {
  // A pipeline-parallel group runs one backend at a time (its workers hold one state), and
  // rank 0 holds only its stage's layers, so the full-precision reference cannot run there.
  if (config_.pipeline_parallel_size > 1)
    return UnimplementedError(
        "eval kl holds two KV caches at once, which --pipeline-parallel-size > 1 does not "
        "support yet (eval perplexity does; eval kl -tp N does)");
  ASSIGN_OR_RETURN(Plan plan, MakePlan(docs, options));
  EngineConfig ref_config = config_;
  ref_config.kv_cache_dtype = KvCacheDtype::kAuto;
  ref_config.kv_cache_dtype_skip_layers.clear();
  ref_config.calculate_kv_scales = false;
  // Under tensor parallelism the workers hold one backend (one KV cache) each, and the two
  // passes run side by side: the candidate runs split, the reference on this rank alone, over
  // the whole model it holds anyway (the unsplit model's logits).
  ref_config.tensor_parallel_size = 1;
  ref_config.tensor_parallel_group = nullptr;
  ASSIGN_OR_RETURN(std::unique_ptr<Pass> ref,
                   Pass::Create(*model_, *tokenizer_, ref_config, pool_.get(), plan.num_blocks,
                                plan.max_length));
  ASSIGN_OR_RETURN(
      std::unique_ptr<Pass> cand,
      Pass::Create(*model_, *tokenizer_, config_, pool_.get(), plan.num_blocks, plan.max_length));
  KlResult r;
  RETURN_IF_ERROR(Run(docs, plan, *cand, ref.get(), &r));
  return r;
}

}  // namespace pagellm
