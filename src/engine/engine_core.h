// The engine core: owns every piece of mutable serving state (scheduler, KV cache, per-request
// sampling / detokenization / stop state) and advances it one step at a time:
//   Schedule -> swap copies -> Forward (one ragged batch) -> sample -> UpdateFromOutput.
// It is single-threaded by design; AsyncEngine runs it on its loop thread and LLM runs it in
// the caller's thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "base/thread_pool.h"
#include "engine/engine_config.h"
#include "engine/engine_output.h"
#include "engine/engine_stats.h"
#include "model/model_weights.h"
#include "pagellm/outputs.h"
#include "pagellm/sampling_params.h"
#include "sample/sampler.h"
#include "sample/sampler_state.h"
#include "sample/stop_checker.h"
#include "sched/scheduler.h"
#include "spec/adaptive_draft_policy.h"
#include "spec/draft_model_proposer.h"
#include "spec/ngram_proposer.h"
#include "spec/spec_decode_stats.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

class EngineCore {
 public:
  // Loads the model and tokenizer, sizes and allocates the KV cache (refusing an impossible
  // max_model_len with the numbers), and builds the scheduler.
  static StatusOr<std::unique_ptr<EngineCore>> Create(const EngineConfig& config);

  // Checks a request without touching engine state (safe from any thread): sampling params,
  // prompt length against max_model_len, token ids against the vocabulary.
  Status ValidateRequest(const EngineRequest& request) const;
  Status AddRequest(EngineRequest request);
  // Aborts a request; its final output (finish_reason "abort") comes from the next Step().
  void Abort(const std::string& request_id);
  bool HasUnfinishedRequests() const;
  // Runs one step and returns what it produced.
  StatusOr<std::vector<EngineOutput>> Step();

  EngineStats stats() const;
  const KvCacheReport& kv_report() const { return kv_report_; }
  const ModelConfig& model_config() const { return model_->config; }
  const LoadedModel& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const EngineConfig& config() const { return config_; }
  int32_t max_model_len() const { return config_.scheduler.max_model_len; }
  bool ResetPrefixCache() { return scheduler_->ResetPrefixCache(); }
  // Tokens (prompt and generated) computed by the last Step(); 0 when it ran no batch.
  int32_t last_step_num_tokens() const { return last_step_num_tokens_; }
  // For tests: poison the whole KV cache with NaN (unused slots must never be read).
  void PoisonKvCache() {
    backend_->PoisonKvCache();
    if (draft_) draft_->PoisonKvCache();
  }

 private:
  struct RequestState {
    SamplingParams params;
    SamplerState rng;
    std::optional<IncrementalDetokenizer> detok;
    StopChecker stop;
    int32_t num_prompt_tokens;
    std::chrono::steady_clock::time_point first_scheduled{};
    std::vector<int32_t> prompt;  // kept only when prompt logprobs are wanted
    std::vector<std::optional<TokenLogprobEntry>> prompt_logprobs;
    bool prompt_logprobs_sent = false;
    // Draft-model speculation of a random request: [drafts][vocab] distributions the pending
    // drafts were drawn from (empty for greedy requests and n-gram drafts).
    std::vector<float> draft_probs;
  };

  EngineCore() = default;
  // Samples one token for a scheduled request and runs its stop check.
  void SampleRequest(const ScheduledRequest& sched, const float* logits, Sampler& sampler,
                     EngineOutput& out, SampledTokens& sampled);
  // Per pool thread, reused by every verification it runs (no allocation per request).
  struct VerifyScratch {
    std::vector<float> probs;      // [k+1][vocab] target probabilities (sampled requests)
    std::vector<int32_t> outputs;  // the request's output ids followed by its drafts
    std::vector<int32_t> targets;  // [k+1] target greedy tokens (greedy requests)
  };
  // Speculative decoding: verifies a request's num_spec_tokens drafts against the target rows
  // [first_row, first_row + drafts] (rejection sampling), then appends the emitted tokens one
  // by one through the stop check, which may cut the run short.
  // Returns the number of drafts accepted.
  int32_t VerifyRequest(const ScheduledRequest& sched, int32_t first_row, Sampler& sampler,
                        VerifyScratch& scratch, EngineOutput& out, SampledTokens& sampled,
                        SpecDecodeStats& stats);
  // After a step's update: the draft model catches up on the verified tokens (finished
  // requests included, so cached blocks hold draft KV too), then drafts for the next step, as
  // many per request as draft_policy_ allocates.
  Status ProposeDrafts(const SchedulerOutput& sched, const SampledTokensMap& sampled);
  // Drafts a running request may get next step (0 = none): k, bounded by max_model_len, its
  // remaining output tokens and the draft model's length.
  int32_t MaxDrafts(const Request& req) const;
  // Scores prompt tokens p+1 with the logits of rows at positions p of this step.
  void ScorePromptTokens(const ScheduledRequest& sched, int32_t first_row, Sampler& sampler);

  EngineConfig config_;
  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Backend> backend_;  // owns the KV cache and its swap pool
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<Sampler> samplers_;  // one per pool thread
  SeedSource seeds_{0};
  std::vector<int32_t> eos_ids_;
  int32_t eos_id_ = -1;
  std::unordered_map<std::string, std::unique_ptr<RequestState>> states_;
  std::vector<std::string> pending_aborts_;
  KvCacheReport kv_report_;
  int64_t num_steps_ = 0;
  int32_t last_step_num_tokens_ = 0;
  // Speculative decoding (null when off).
  std::unique_ptr<DraftModelProposer> draft_;
  std::unique_ptr<NgramProposer> ngram_;
  SpecDecodeStats spec_stats_;
  AdaptiveDraftPolicy draft_policy_;           // drafts per request and step (adaptive or fixed k)
  std::vector<VerifyScratch> verify_scratch_;  // per pool thread
  // Reused across steps.
  ForwardBatch batch_;
  ForwardOutput forward_out_;
};

}  // namespace pagellm
