// Request: one generation request as the scheduler and the KV cache manager see it.
//
// Its tokens are prompt + outputs in one contiguous vector, because after preemption (recompute)
// both are fed again as one sequence and prefix-cache keys chain over both.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/finish_reason.h"
#include "kv/block_hash.h"
#include "pagellm/check.h"

namespace pagellm {

enum class RequestStatus : uint8_t {
  kWaiting,  // never scheduled, or resumed but not yet readmitted after recompute preemption
  kRunning,
  kPreempted,             // recompute preemption: waiting again with num_computed_tokens = 0
  kSwapped,               // swap preemption: waiting, KV held in the secondary pool
  kFinishedStopped,       // EOS, stop token or stop string (decided by the caller)
  kFinishedLengthCapped,  // max_tokens or max_model_len reached
  kFinishedAborted,
  kFinishedIgnored,  // rejected before running (e.g. prompt too long)
};

inline bool IsFinished(RequestStatus s) {
  return s >= RequestStatus::kFinishedStopped;
}

inline std::string_view RequestStatusName(RequestStatus s) {
  switch (s) {
    case RequestStatus::kWaiting:
      return "WAITING";
    case RequestStatus::kRunning:
      return "RUNNING";
    case RequestStatus::kPreempted:
      return "PREEMPTED";
    case RequestStatus::kSwapped:
      return "SWAPPED";
    case RequestStatus::kFinishedStopped:
      return "FINISHED_STOPPED";
    case RequestStatus::kFinishedLengthCapped:
      return "FINISHED_LENGTH_CAPPED";
    case RequestStatus::kFinishedAborted:
      return "FINISHED_ABORTED";
    case RequestStatus::kFinishedIgnored:
      return "FINISHED_IGNORED";
  }
  return "UNKNOWN";
}

// The finish reason of a finished status, as vLLM reports it (an ignored request, one that can
// never fit, counts as "length").
inline FinishReason FinishReasonOf(RequestStatus s) {
  switch (s) {
    case RequestStatus::kFinishedStopped:
      return FinishReason::kStop;
    case RequestStatus::kFinishedAborted:
      return FinishReason::kAbort;
    default:
      CHECK(s == RequestStatus::kFinishedLengthCapped || s == RequestStatus::kFinishedIgnored);
      return FinishReason::kLength;
  }
}

class Request {
 public:
  Request(std::string id, std::vector<int32_t> prompt_token_ids, int32_t max_tokens)
      : id_(std::move(id)),
        all_token_ids_(std::move(prompt_token_ids)),
        num_prompt_tokens_(static_cast<int32_t>(all_token_ids_.size())),
        max_tokens_(max_tokens) {}

  // ---- Set by the caller before Scheduler::AddRequest. ----
  const std::string& id() const { return id_; }
  int32_t max_tokens() const { return max_tokens_; }
  // Lower runs first under --scheduling-policy priority (vLLM convention).
  int priority = 0;
  // True when every prompt position's logits are needed (prompt_logprobs): a prefix-cache hit
  // would skip computing them, so the lookup is skipped (vLLM's skip_reading_prefix_cache).
  bool skip_prefix_cache = false;
  // Per-tenant isolation of the prefix cache: an extra key of the first block.
  std::optional<std::string> cache_salt;

  // ---- Tokens. ----
  std::span<const int32_t> all_token_ids() const { return all_token_ids_; }
  std::span<const int32_t> prompt_token_ids() const {
    return std::span<const int32_t>(all_token_ids_).first(num_prompt_tokens_);
  }
  std::span<const int32_t> output_token_ids() const {
    return std::span<const int32_t>(all_token_ids_).subspan(num_prompt_tokens_);
  }
  int32_t num_prompt_tokens() const { return num_prompt_tokens_; }
  int32_t num_tokens() const { return static_cast<int32_t>(all_token_ids_.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens_; }
  int32_t num_tokens_with_spec() const {
    return num_tokens() + static_cast<int32_t>(spec_token_ids.size());
  }
  void AppendOutputToken(int32_t token_id) { all_token_ids_.push_back(token_id); }

  // ---- Owned by the scheduler and the KV cache manager. ----
  // Assigned by AddRequest: arrival order, the tie-breaker of every policy.
  uint64_t arrival_seq = 0;
  RequestStatus status = RequestStatus::kWaiting;
  // Tokens whose KV is in the cache (computed or served by the prefix cache).
  int32_t num_computed_tokens = 0;
  // Prompt tokens served by the prefix cache when first scheduled (usage.cached_tokens); -1
  // until then.
  int32_t num_cached_tokens = -1;
  int32_t num_preemptions = 0;
  // Prefix-cache key of every full block of all_token_ids(), extended as tokens arrive.
  std::vector<BlockHash> block_hashes;
  // Draft tokens proposed for the next step (speculative decoding); never hashed or cached.
  std::vector<int32_t> spec_token_ids;

 private:
  std::string id_;
  std::vector<int32_t> all_token_ids_;
  int32_t num_prompt_tokens_;
  int32_t max_tokens_;
};

}  // namespace pagellm
