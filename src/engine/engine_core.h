// The engine core: owns every piece of mutable serving state and advances it one step at a time.
// One Step() is
//   schedule (sched/scheduler.h) -> execute (swap copies, one ragged Backend::Forward)
//   -> sample (sample/sampler.h; drafts verified by spec/speculative_decoder.h)
//   -> update (Scheduler::UpdateFromOutput) -> outputs (engine/output_processor.h: text, stop
//   strings, logprobs, finish reasons), and with speculative decoding the next step's drafts.
// Per-request state: the scheduler's Request (tokens, blocks) and the OutputProcessor's
// RequestState (sampling, detokenization, stop check, speculative part), both keyed by id.
// It is single-threaded by design; AsyncEngine runs it on its loop thread and LLM runs it in
// the caller's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/thread_pool.h"
#include "engine/engine_config.h"
#include "engine/engine_output.h"
#include "engine/engine_stats.h"
#include "engine/output_processor.h"
#include "grammar/grammar_compiler.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "sample/sampler.h"
#include "sample/sampler_state.h"
#include "sched/scheduler.h"
#include "spec/speculative_decoder.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

class EngineCore {
 public:
  // Loads the model and tokenizer, sizes and allocates the KV cache (refusing an impossible
  // max_model_len with the numbers), and builds the scheduler.
  static StatusOr<std::unique_ptr<EngineCore>> Create(const EngineConfig& config);
  // An engine over a given backend instead of a loaded model (tests: a scripted backend). The
  // model has `model_config` and no weights, so the KV cache is sized by
  // config.num_gpu_blocks_override; `tokenizer` detokenizes the outputs.
  static StatusOr<std::unique_ptr<EngineCore>> Create(const EngineConfig& config,
                                                      const ModelConfig& model_config,
                                                      std::unique_ptr<Tokenizer> tokenizer,
                                                      std::unique_ptr<Backend> backend);

  // Checks a request without touching engine state (safe from any thread): sampling params,
  // prompt length against max_model_len, token ids against the vocabulary, and compiles its
  // structured-output constraint (cached; an invalid schema, regex or grammar is an
  // InvalidArgument saying where). The server calls it on its own threads, so compilation
  // stays off the engine loop.
  Status ValidateRequest(const EngineRequest& request) const;
  Status AddRequest(EngineRequest request);
  // Aborts a request; its final output (FinishReason::kAbort) comes from the next Step().
  void Abort(const std::string& request_id);
  bool HasUnfinishedRequests() const;
  // Runs one step and returns what it produced.
  StatusOr<std::vector<EngineOutput>> Step();

  EngineStats stats() const;
  const KvCacheReport& kv_report() const { return kv_report_; }
  // The KV cache this process allocated: the whole model's, or under tensor and pipeline
  // parallelism rank 0's part (every rank holds as many blocks of its own part).
  const KvCacheShape& local_kv_shape() const { return backend_->kv_shape(); }
  // The block tables (for tests and debugging: blocks held per request and KV cache group).
  const KvCacheManager& kv_cache_manager() const { return scheduler_->kv_cache_manager(); }
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
    if (spec_) spec_->PoisonKvCache();
  }

 private:
  // What sampling produced for the requests of a step that sample, in schedule order.
  struct StepSamples {
    std::vector<int32_t> index;         // [n] index into SchedulerOutput::scheduled
    std::vector<EngineOutput> outputs;  // [n]
    SampledTokensMap tokens;            // request id -> tokens appended (for the scheduler)
  };

  EngineCore() = default;
  // Create()'s work once the model and tokenizer exist; a null backend means the model's own.
  static StatusOr<std::unique_ptr<EngineCore>> Build(const EngineConfig& config,
                                                     std::unique_ptr<LoadedModel> model,
                                                     std::unique_ptr<Tokenizer> tokenizer,
                                                     std::unique_ptr<Backend> backend);
  // The final outputs of the requests aborted since the last step (their blocks are freed for
  // this step's schedule).
  std::vector<EngineOutput> ProcessAborts();
  // Runs the step's forward (one ragged batch) and scores prompt logprobs from its rows.
  Status Execute(const SchedulerOutput& sched);
  // Samples (or verifies the drafts of) every request that reached the end of its known tokens,
  // in parallel, each through its stop check.
  StepSamples Sample(const SchedulerOutput& sched);
  // One request of Sample(): `last_row` is its last logits row; `thread` the pool thread.
  // Returns the number of drafts accepted (0 without drafts).
  int32_t SampleRequest(const ScheduledRequest& sched, int32_t last_row, int thread,
                        EngineOutput& out);
  // Hands the sampled tokens to the scheduler and completes this step's outputs (finish
  // reasons, final text), appending them to `outputs`; returns the ids that finished.
  std::vector<std::string> Update(const SchedulerOutput& sched, StepSamples& samples,
                                  std::vector<EngineOutput>& outputs);
  // Structured outputs: the constraint's compiled grammar (the compiler is made on first use).
  StatusOr<std::shared_ptr<const CompiledGrammar>> CompileConstraint(
      const StructuredOutputs& spec) const;
  // Fills st.mask from st.matcher (timed into the grammar stats); false when no token is allowed.
  bool FillGrammarMask(RequestState& st, std::span<uint64_t> mask);
  // Draft verification under a constraint: fills st.spec_masks with the masks at each of the
  // d + 1 verified positions (the matcher tries the drafts and is rolled back).
  void FillDraftMasks(RequestState& st, std::span<const int32_t> drafts);
  // With speculative decoding: the next step's drafts, then the draft state of the finished
  // requests is dropped.
  Status Speculate(const SchedulerOutput& sched, const SampledTokensMap& sampled,
                   const std::vector<std::string>& finished);

  EngineConfig config_;
  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Backend> backend_;  // owns the KV cache and its swap pool
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<Sampler> samplers_;  // one per pool thread
  SeedSource seeds_{0};
  std::unique_ptr<OutputProcessor> output_;
  std::vector<std::string> pending_aborts_;
  KvCacheReport kv_report_;
  int64_t num_steps_ = 0;
  int32_t last_step_num_tokens_ = 0;
  std::unique_ptr<SpeculativeDecoder> spec_;  // null when speculative decoding is off
  std::vector<int32_t> eos_ids_;              // ids that end generation (the grammar's EOS)
  mutable std::once_flag grammar_once_;
  mutable std::unique_ptr<GrammarCompiler> grammar_;
  std::atomic<int64_t> grammar_masks_{0};
  std::atomic<int64_t> grammar_mask_ns_{0};
  // Tensor parallelism: forward and communication time so far (EngineStats::tp_*).
  int64_t tp_forward_steps_ = 0;
  double tp_forward_seconds_ = 0;
  double tp_comm_seconds_ = 0;
  double tp_all_reduce_seconds_ = 0;
  int64_t tp_all_reduces_ = 0;
  // Reused across steps.
  ForwardBatch batch_;
  ForwardOutput forward_out_;
};

}  // namespace pagellm
