// Scheduler: decides, every engine step, which tokens of which requests to compute, with vLLM
// V1 semantics (docs/ARCHITECTURE.md, "One engine step").
//
// There is no prefill or decode phase: each request has num_computed_tokens and the scheduler
// hands out a per-step token budget so that it catches up with the request's tokens (prompt,
// outputs, drafts). One rule covers chunked prefill, prefix-cache hits, speculative decoding and
// resumed requests. Each step:
//  1. RUNNING requests, in order, each capped by --long-prefill-token-threshold, the remaining
//     budget and max_model_len - 1 - num_computed_tokens. When the KV cache cannot grow, the
//     scheduler preempts (FCFS: the last running request; priority: the largest
//     (priority, arrival)) until it can; if the victim is the request itself, the pass stops.
//  2. WAITING requests (new, preempted, swapped), only if nothing was preempted this step, while
//     budget remains and fewer than --max-num-seqs run. New and recomputed requests first take
//     their cached prefix. A request that does not get its blocks stops admission (waiting
//     requests never preempt).
//
// Single-threaded by design: the engine loop owns it (schedule -> execute -> UpdateFromOutput,
// then aborts and new requests between steps).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/request.h"
#include "pagellm/status.h"
#include "sched/scheduler_config.h"
#include "sched/scheduler_output.h"

namespace pagellm {

class Scheduler {
 public:
  // config must be valid (SchedulerConfig::Validate) and agree with kv on max_model_len.
  Scheduler(const SchedulerConfig& config, KvCacheManager kv);

  // Queues a request (status WAITING). InvalidArgument for a duplicate id, an empty prompt, a
  // prompt leaving no room for output within max_model_len, or a request whose longest possible
  // sequence could not fit the KV cache even alone.
  Status AddRequest(Request request);

  // Plans one step. Call UpdateFromOutput with its result before the next Schedule.
  SchedulerOutput Schedule();

  // Applies a step's results: advances num_computed_tokens of every scheduled request, appends
  // sampled tokens (dropping rejected drafts), finishes requests on the caller's stop flag or on
  // max_tokens / max_model_len, and frees finished requests' blocks. `sampled` must hold an
  // entry for every scheduled request with `samples` set.
  std::vector<RequestUpdate> UpdateFromOutput(const SchedulerOutput& output,
                                              const SampledTokensMap& sampled);

  // Finishes requests with a FINISHED_* status (stop strings found later, aborts), freeing all
  // their blocks at once. Unknown or already finished ids are ignored; returns how many finished.
  int FinishRequests(std::span<const std::string> request_ids, RequestStatus status);
  bool Abort(const std::string& request_id);

  // Draft tokens for a running request's next step (speculative decoding); replaces any
  // previous drafts. Ignored for unknown requests.
  void SetSpecTokens(const std::string& request_id, std::vector<int32_t> spec_token_ids);

  // nullptr once finished.
  const Request* GetRequest(const std::string& request_id) const;

  // Counters (vllm:num_requests_running / waiting / swapped, vllm:num_preemptions).
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()) - num_swapped_; }
  int32_t num_swapped() const { return num_swapped_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  bool has_unfinished_requests() const { return !requests_.empty(); }

  // Running ids in order, and waiting ids from the head (for tests and debugging).
  std::vector<std::string> RunningIds() const;
  std::vector<std::string> WaitingIds() const;

  const SchedulerConfig& config() const { return config_; }
  const KvCacheManager& kv_cache_manager() const { return kv_; }
  // Refused (false) while any block is in use, as in vLLM.
  bool ResetPrefixCache() { return kv_.ResetPrefixCache(); }

 private:
  struct Planned {
    Request* req;
    int32_t num_tokens;
    int32_t num_spec_tokens;
    bool is_new;
  };

  // Step phase 1: running requests, preempting as needed. Returns whether it preempted.
  bool ScheduleRunning(int32_t& budget, std::vector<Planned>& planned, SchedulerOutput& out);
  // Step phase 2: admits waiting requests (prefix hits, swap-ins) while budget and room last.
  void ScheduleWaiting(int32_t& budget, std::vector<Planned>& planned, SchedulerOutput& out);
  // Caps a request's wish for this step by the threshold and the remaining budget.
  int32_t CapByThresholdAndBudget(int32_t num_new_tokens, int32_t budget) const;
  // --max-num-partial-prefills / --max-long-partial-prefills: whether `req`, if it is still
  // prefilling, may get prompt tokens this step given the prefills already planned; counts it
  // when it may.
  bool AdmitPrefill(const Request& req);

  int32_t step_prefills_ = 0;       // requests with prompt tokens planned this step
  int32_t step_long_prefills_ = 0;  // of those, prompts over long_prefill_token_threshold
  Request* PickVictim() const;
  // Swap (if configured and room) or recompute; puts the victim back into the waiting queue.
  void Preempt(Request& victim, SchedulerOutput& out);
  // FCFS: front (resumes first). Priority: by (priority, arrival).
  void PushWaitingFront(Request* req);
  void PushWaitingBack(Request* req);
  void Finish(Request& req, RequestStatus status);
  ScheduledRequest MakeScheduledRequest(const Planned& p) const;

  SchedulerConfig config_;
  KvCacheManager kv_;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;
  std::vector<Request*> running_;
  std::deque<Request*> waiting_;  // priority policy: kept sorted by (priority, arrival)
  std::vector<std::string> finished_ids_;
  uint64_t next_arrival_seq_ = 0;
  int32_t num_swapped_ = 0;
  int64_t num_preemptions_ = 0;
  // Schedule() output whose UpdateFromOutput has not arrived yet.
  bool step_in_flight_ = false;
};

}  // namespace pagellm
