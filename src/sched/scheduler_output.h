// What one scheduler step hands to the executor, and what the executor hands back.
//
// Executor contract for one step:
//  1. Drop per-request state of finished_request_ids and preempted_request_ids.
//  2. Perform every swap_out copy (device -> host), then every swap_in copy (host -> device),
//     before the forward pass: a swapped-out block may be handed to another request in the same
//     step. (A step never has both: swap-outs happen only in steps that preempt, and such steps
//     admit nothing, so no swap-in can read a host block a swap-out of the same step writes.)
//  3. Run the forward pass over all scheduled requests. Per layer, write the K/V of every
//     scheduled token before any attention of that layer reads the cache: as in vLLM, a request
//     admitted this step may hit prefix blocks another request fills in this very step.
//  4. Sample for requests with `samples` set (one token, or accepted drafts + one with spec
//     decoding) and pass them to Scheduler::UpdateFromOutput.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/request.h"

namespace pagellm {

struct ScheduledRequest {
  std::string request_id;
  // Position of token_ids[0]: tokens before it already have KV in the cache.
  int32_t num_computed_tokens = 0;
  int32_t num_scheduled_tokens = 0;
  // The num_scheduled_tokens tokens to feed, at positions num_computed_tokens + i: a slice of
  // prompt + outputs, followed by num_spec_tokens draft tokens when speculating.
  std::vector<int32_t> token_ids;
  int32_t num_spec_tokens = 0;
  // The request's whole block table after this step's allocation (block i holds positions
  // [i * block_size, (i + 1) * block_size)).
  std::vector<int32_t> block_table;
  // With several KV cache groups (sliding-window layers, kv/kv_cache_groups.h): every group's
  // table, group 0's equal to block_table; a window group has the null block 0 where its window
  // no longer reaches. Empty with one group.
  std::vector<std::vector<int32_t>> group_block_tables;
  // First scheduled, or resumed after preemption: the executor creates its per-request state.
  bool is_new = false;
  // This step reaches the end of the request's known tokens, so its last position's logits are
  // sampled. False for every prefill chunk but the last (their logits are not needed).
  bool samples = false;
};

struct SchedulerOutput {
  // Running requests first (in running order), then requests admitted this step.
  std::vector<ScheduledRequest> scheduled;
  int32_t total_num_scheduled_tokens = 0;
  // Requests preempted this step (recompute or swap), in preemption order.
  std::vector<std::string> preempted_request_ids;
  std::vector<BlockCopy> swap_out;  // src = device block, dst = host block
  std::vector<BlockCopy> swap_in;   // src = host block, dst = device block
  // Requests finished or aborted since the previous step.
  std::vector<std::string> finished_request_ids;

  bool has_work() const { return !scheduled.empty(); }
};

// The executor's result for one request that sampled.
struct SampledTokens {
  // Tokens to append: one normally; with speculative decoding the accepted drafts plus the
  // recovered or bonus token.
  std::vector<int32_t> token_ids;
  // The caller's stop check (EOS, stop token ids, stop strings) fired on the last of token_ids;
  // the caller truncates token_ids after the stopping token.
  bool stop = false;
};

using SampledTokensMap = std::unordered_map<std::string, SampledTokens>;

// Per request that got tokens or finished in a step.
struct RequestUpdate {
  std::string request_id;
  std::vector<int32_t> new_token_ids;
  // FINISHED_* if the request finished in this step (its blocks are already freed).
  RequestStatus status = RequestStatus::kRunning;
  // Prompt tokens served by the prefix cache at first scheduling.
  int32_t num_cached_tokens = 0;
  int32_t num_preemptions = 0;

  bool finished() const { return IsFinished(status); }
};

}  // namespace pagellm
