#include "sched/scheduler_config.h"

#include <string>

#include "fmt/format.h"

namespace pagellm {

StatusOr<SchedulingPolicy> ParseSchedulingPolicy(std::string_view name) {
  if (name == "fcfs") return SchedulingPolicy::kFcfs;
  if (name == "priority") return SchedulingPolicy::kPriority;
  return InvalidArgumentError(
      fmt::format("--scheduling-policy must be fcfs or priority, got '{}'", name));
}

StatusOr<PreemptionMode> ParsePreemptionMode(std::string_view name) {
  if (name == "recompute") return PreemptionMode::kRecompute;
  if (name == "swap") return PreemptionMode::kSwap;
  return InvalidArgumentError(
      fmt::format("--preemption-mode must be recompute or swap, got '{}'", name));
}

std::string_view SchedulingPolicyName(SchedulingPolicy policy) {
  return policy == SchedulingPolicy::kFcfs ? "fcfs" : "priority";
}

std::string_view PreemptionModeName(PreemptionMode mode) {
  return mode == PreemptionMode::kRecompute ? "recompute" : "swap";
}

Status SchedulerConfig::Validate() const {
  if (max_num_batched_tokens < 1) {
    return InvalidArgumentError(
        fmt::format("--max-num-batched-tokens must be >= 1, got {}", max_num_batched_tokens));
  }
  if (max_num_seqs < 1) {
    return InvalidArgumentError(fmt::format("--max-num-seqs must be >= 1, got {}", max_num_seqs));
  }
  if (max_model_len < 2) {
    // One prompt token and one output token at least.
    return InvalidArgumentError(fmt::format("--max-model-len must be >= 2, got {}", max_model_len));
  }
  if (long_prefill_token_threshold < 0) {
    return InvalidArgumentError(fmt::format("--long-prefill-token-threshold must be >= 0, got {}",
                                            long_prefill_token_threshold));
  }
  if (max_num_partial_prefills < 0 || max_long_partial_prefills < 0) {
    return InvalidArgumentError(
        "--max-num-partial-prefills and --max-long-partial-prefills must be >= 0");
  }
  if (max_num_partial_prefills > 0 && max_long_partial_prefills > max_num_partial_prefills) {
    // vLLM's rule.
    return InvalidArgumentError(
        fmt::format("--max-long-partial-prefills ({}) must be less than or equal to "
                    "--max-num-partial-prefills ({}).",
                    max_long_partial_prefills, max_num_partial_prefills));
  }
  if (max_num_partial_prefills > 1 && !enable_chunked_prefill) {
    return InvalidArgumentError(
        "Chunked prefill must be enabled to set max_num_partial_prefills > 1.");
  }
  if (num_lookahead_tokens < 0) {
    return InvalidArgumentError(
        fmt::format("num_lookahead_tokens must be >= 0, got {}", num_lookahead_tokens));
  }
  if (!enable_chunked_prefill && max_num_batched_tokens < max_model_len) {
    // Without chunking a prompt must fit one step; a longer one would wait forever.
    return InvalidArgumentError(fmt::format(
        "--max-num-batched-tokens ({}) is smaller than --max-model-len ({}): longer prompts "
        "could never be scheduled without chunked prefill. Increase --max-num-batched-tokens, "
        "decrease --max-model-len or enable chunked prefill",
        max_num_batched_tokens, max_model_len));
  }
  return Status::Ok();
}

}  // namespace pagellm
