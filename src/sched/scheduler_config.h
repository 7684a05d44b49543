// Scheduler settings, named and defaulted as vLLM's SchedulerConfig / engine flags.
#pragma once

#include <cstdint>
#include <string_view>

#include "pagellm/status.h"

namespace pagellm {

// --scheduling-policy: fcfs serves in arrival order; priority serves by (priority, arrival),
// lower priority values first, and preempts the request with the largest (priority, arrival).
enum class SchedulingPolicy : uint8_t { kFcfs, kPriority };

// --preemption-mode: recompute drops a victim's KV and recomputes prompt and outputs later
// (vLLM V1's only mode); swap copies its KV to the secondary (host) pool and back, falling
// back to recompute when the secondary pool is full.
enum class PreemptionMode : uint8_t { kRecompute, kSwap };

StatusOr<SchedulingPolicy> ParseSchedulingPolicy(std::string_view name);  // "fcfs" | "priority"
StatusOr<PreemptionMode> ParsePreemptionMode(std::string_view name);      // "recompute" | "swap"
std::string_view SchedulingPolicyName(SchedulingPolicy policy);
std::string_view PreemptionModeName(PreemptionMode mode);

struct SchedulerConfig {
  // --max-num-batched-tokens: the token budget of one step (prefill chunks + decodes + drafts).
  int32_t max_num_batched_tokens = 2048;
  // --max-num-seqs: most requests running at once.
  int32_t max_num_seqs = 256;
  // --max-model-len: prompt + output tokens of one request.
  int32_t max_model_len = 2048;
  // --enable-chunked-prefill (on by default): a prompt larger than the remaining budget is
  // split across steps; when off it waits for a step whose budget holds it whole.
  bool enable_chunked_prefill = true;
  // --long-prefill-token-threshold: most tokens one request may take in a step; 0 = no cap.
  int32_t long_prefill_token_threshold = 0;
  // --max-num-partial-prefills: most requests with an unfinished prompt that get prompt tokens
  // in one step; --max-long-partial-prefills: of those, most whose prompt is longer than
  // long_prefill_token_threshold. 0 = no limit (vLLM V1's scheduler has none either).
  int32_t max_num_partial_prefills = 0;
  int32_t max_long_partial_prefills = 0;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  PreemptionMode preemption_mode = PreemptionMode::kRecompute;
  // KV slots reserved beyond the scheduled tokens for drafters that write ahead (EAGLE-style
  // speculative decoding); 0 otherwise.
  int32_t num_lookahead_tokens = 0;

  // Rejects values that cannot work, with the flag name in the message.
  Status Validate() const;
};

}  // namespace pagellm
