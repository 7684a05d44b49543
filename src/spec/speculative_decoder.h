// SpeculativeDecoder: everything speculative decoding adds to an engine step, behind one
// interface: the proposer (a draft model, src/spec/draft_model_proposer.h, or n-gram prompt
// lookup, src/spec/ngram_proposer.h), the draft policy (src/spec/adaptive_draft_policy.h), the
// verification of drafts by rejection sampling (src/sample/rejection_sampler.h) and the
// acceptance counters. The engine core (src/engine/engine_core.cc) drives it per step:
//
//   OnScheduled(sched)      the draft's KV follows the target's swaps; new requests restart
//   Verify(...)             per request with drafts, after the target's forward (parallel)
//   Observe(...)            per verification, in request order (counters, draft policy)
//   ProposeDrafts(...)      after the scheduler update: the draft catches up and the next
//                           step's drafts go to the scheduler (Scheduler::SetSpecTokens)
//   RemoveRequest(id)       once a request is finished or aborted
//
// Per-request state the engine keeps with its request (SpecRequestState) is handed in through
// SpecRequestRef; the decoder keeps none of the engine's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/forward_batch.h"
#include "base/thread_pool.h"
#include "kv/request.h"
#include "model/model_weights.h"
#include "pagellm/sampling_params.h"
#include "pagellm/status.h"
#include "sample/rejection_sampler.h"
#include "sample/sampler.h"
#include "sample/sampler_state.h"
#include "sched/scheduler.h"
#include "spec/adaptive_draft_policy.h"
#include "spec/draft_model_proposer.h"
#include "spec/ngram_proposer.h"
#include "spec/spec_decode_stats.h"
#include "spec/speculative_config.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

// The part of a request's state that belongs to speculative decoding; the engine owns it (in
// its per-request state) and the decoder reads and writes it through SpecRequestRef.
struct SpecRequestState {
  // Draft-model speculation of a random request: [drafts][vocab] distributions the pending
  // drafts were drawn from (empty for greedy requests and n-gram drafts).
  std::vector<float> draft_probs;
};

// What the decoder needs of one of the engine's requests.
struct SpecRequestRef {
  const SamplingParams* params = nullptr;
  SamplerState* rng = nullptr;  // the request's own generator (drafting and verification)
  int32_t num_prompt_tokens = 0;
  SpecRequestState* spec = nullptr;
};

class SpeculativeDecoder {
 public:
  // `config` is resolved (ResolveSpeculativeConfig) and enabled. Loads the draft model (checked
  // against the target's tokenizer) or builds the n-gram proposer. max_model_len: the
  // target's; max_num_seqs: the scheduler's (the draft policy's view of the next step).
  static StatusOr<std::unique_ptr<SpeculativeDecoder>> Create(const SpeculativeConfig& config,
                                                              const LoadedModel& target,
                                                              const Tokenizer& tokenizer,
                                                              int32_t max_model_len,
                                                              int32_t max_num_seqs);

  // KV slots past a request's newest token the scheduler must reserve: the draft model writes
  // KV for drafts 1..k-1 there (k); n-gram drafting writes none (0).
  int32_t num_lookahead_tokens() const;
  // The draft model, for sizing the KV cache (null for n-gram).
  const DraftModelProposer* draft_model() const { return draft_.get(); }
  // Allocates the draft model's KV cache (the target's block count, null block included, and
  // its secondary pool when num_swap_blocks > 0) and the per-thread verification scratch.
  Status Allocate(int32_t block_size, int32_t num_blocks, int32_t num_swap_blocks, ThreadPool* pool,
                  std::span<const int32_t> eos_ids);
  // For tests: poisons the draft's KV cache with NaN.
  void PoisonKvCache();

  // Before the step's forward: the draft's cache follows the target's block tables, so it moves
  // with the target's swap copies; requests (re)scheduled from scratch restart in the draft.
  void OnScheduled(const SchedulerOutput& sched);

  // Verifies the sched.num_spec_tokens drafts of a request against the target's logits rows
  // [first_row, first_row + drafts] of `logits` (rejection sampling; greedy requests by argmax).
  // Returns the accepted drafts followed by one recovered or bonus token. Safe to call in
  // parallel for different requests with distinct `thread` (< the pool's thread count).
  // allowed_tokens: empty, or a structured-output constraint's [drafts + 1][mask words] token
  // masks, row j for the position after drafts [0, j) (SamplingInput::allowed_tokens): the
  // target's distribution at each position is the constrained one, so a draft the grammar
  // forbids has target probability 0 and is rejected.
  RejectionResult Verify(const ScheduledRequest& sched, const Request& req,
                         const SpecRequestRef& ref, std::span<const int32_t> eos_ids,
                         const ForwardOutput& logits, int32_t first_row, int32_t vocab_size,
                         Sampler& sampler, int thread,
                         std::span<const uint64_t> allowed_tokens = {});
  // Records one verification (the acceptance counters and the draft policy's estimate).
  void Observe(const std::string& request_id, int32_t num_drafts, int32_t num_accepted);

  // After the step's scheduler update: the draft model catches up on the verified tokens
  // (finished requests included, so cached blocks hold draft KV too), then drafts for the next
  // step as many tokens per request as the draft policy allocates, handing them to the
  // scheduler. refs[i] belongs to sched.scheduled[i] (unused for requests no longer running);
  // sampled: the tokens each request appended this step.
  Status ProposeDrafts(const SchedulerOutput& sched, std::span<const SpecRequestRef> refs,
                       const SampledTokensMap& sampled, Scheduler& scheduler);

  // Forgets a finished or aborted request (draft KV bookkeeping, acceptance estimate).
  void RemoveRequest(const std::string& request_id);

  const SpeculativeConfig& config() const { return config_; }
  const SpecDecodeStats& stats() const { return stats_; }

 private:
  // Per pool thread, reused by every verification it runs (no allocation per request).
  struct VerifyScratch {
    std::vector<float> probs;      // [k+1][vocab] target probabilities (sampled requests)
    std::vector<int32_t> outputs;  // the request's output ids followed by its drafts
    std::vector<int32_t> targets;  // [k+1] target greedy tokens (greedy requests)
  };

  SpeculativeDecoder() = default;
  // Drafts a running request may get next step (0 = none): k, bounded by max_model_len, its
  // remaining output tokens and the draft model's length.
  int32_t MaxDrafts(const Request& req) const;

  SpeculativeConfig config_;
  int32_t max_model_len_ = 0;
  int32_t max_num_seqs_ = 0;
  std::unique_ptr<DraftModelProposer> draft_;  // kDraftModel
  std::unique_ptr<NgramProposer> ngram_;       // kNgram
  AdaptiveDraftPolicy policy_;                 // drafts per request and step (adaptive or fixed k)
  SpecDecodeStats stats_;
  std::vector<VerifyScratch> scratch_;  // per pool thread
};

}  // namespace pagellm
