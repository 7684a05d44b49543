// Perplexity and KV-cache-dtype divergence measured through the paged engine path: every
// forward runs on a Backend (backend/backend.h) over a real KvCacheStorage (in the configured
// --kv-cache-dtype) with block tables, documents packed into ragged batches with all-position
// logits. The softmax statistics are computed in double.
//
//   Perplexity: each document is BOS + tokens; long documents are scored with sliding windows
//   (see scoring_windows.h). mean NLL = sum of -log p(target) / targets; PPL = exp(mean NLL).
//   KL: the same windows run twice, with the model-dtype ("auto", float32 on this backend)
//   cache as reference P and the configured dtype as Q; per scored position KL(P || Q) and
//   whether argmax P == argmax Q.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/engine_config.h"
#include "eval/scoring_windows.h"
#include "model/model_weights.h"
#include "pagellm/status.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

struct EvalOptions {
  int32_t max_length = 0;     // window length in tokens; 0 = the engine's max_model_len
  int32_t stride = 0;         // window start step; 0 = max_length / 2
  int32_t max_documents = 0;  // score only the first N documents; 0 = all
  // Tokens per forward batch; 0 = 4096, fewer when the logits of a batch would pass 256 MiB.
  int32_t batch_tokens = 0;
};

struct DocumentScore {
  int32_t tokens = 0;  // scored targets
  double nll_sum = 0;  // nats
};

struct PerplexityResult {
  int64_t documents = 0;
  int64_t windows = 0;
  int64_t tokens = 0;  // scored targets
  double nll_sum = 0;  // nats
  std::vector<DocumentScore> per_document;
  double seconds = 0;  // wall time of the forward passes and scoring

  double mean_nll() const { return tokens > 0 ? nll_sum / static_cast<double>(tokens) : 0.0; }
  double perplexity() const;
};

struct KlResult {
  PerplexityResult reference;  // model-dtype cache
  PerplexityResult candidate;  // configured cache dtype
  int64_t positions = 0;       // = scored targets of each
  double kl_sum = 0;           // nats
  double kl_max = 0;
  int64_t top1_agree = 0;

  double mean_kl() const { return positions > 0 ? kl_sum / static_cast<double>(positions) : 0.0; }
  double top1_agreement() const {
    return positions > 0 ? static_cast<double>(top1_agree) / static_cast<double>(positions) : 0.0;
  }
  // Relative perplexity change of the candidate vs the reference (0.01 = +1%).
  double perplexity_change() const;
};

class Evaluator {
 public:
  // Loads config.model and its tokenizer. config also supplies the thread count, the KV block
  // size, max_model_len (default: the model's) and the KV cache dtype.
  static StatusOr<std::unique_ptr<Evaluator>> Create(const EngineConfig& config);
  ~Evaluator();

  // Splits `text` on <|endoftext|> (documents.h) and tokenizes each document with BOS first,
  // as the model was trained; a tokenizer without BOS leaves the first token unscored.
  std::vector<std::vector<int32_t>> TokenizeText(const std::string& text,
                                                 int32_t max_documents) const;

  // Perplexity of `docs` (token ids, BOS included) with the configured KV cache dtype.
  StatusOr<PerplexityResult> Perplexity(const std::vector<std::vector<int32_t>>& docs,
                                        const EvalOptions& options);
  // KL divergence and top-1 agreement of the configured KV cache dtype against the model-dtype
  // cache, with both perplexities. Under tensor parallelism the configured cache runs split and
  // the reference on rank 0 alone (the whole model; the workers hold one cache each).
  StatusOr<KlResult> CompareWithModelDtype(const std::vector<std::vector<int32_t>>& docs,
                                           const EvalOptions& options);

  const LoadedModel& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const EngineConfig& config() const { return config_; }
  // --kv-cache-dtype as given ("auto", "fp8", ...) and the format actually stored ("float32",
  // "fp8_e4m3", ...).
  std::string kv_cache_dtype_name() const;
  std::string kv_cache_storage_name() const;

 private:
  class Pass;
  struct Plan;
  Evaluator() = default;
  StatusOr<Plan> MakePlan(const std::vector<std::vector<int32_t>>& docs,
                          const EvalOptions& options) const;
  // Runs the plan through one (perplexity) or two (KL) passes; `reference` may be null.
  Status Run(const std::vector<std::vector<int32_t>>& docs, const Plan& plan, Pass& candidate,
             Pass* reference, KlResult* result);

  EngineConfig config_;
  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace pagellm
