// DraftModelProposer: a small model of the same vocabulary that proposes k tokens per request
// and step for speculative decoding (vLLM V1's draft_model method).
//
// KV layout (vLLM V1 style): the draft has its own paged KV storage with as many blocks as the
// target's, addressed through the TARGET's block tables. Prefix-cache hits, preemption, swap
// (the engine copies the draft's blocks too) and the rollback of rejected drafts therefore need
// no bookkeeping of their own; in exchange the draft computes KV for every position the target
// computes (prefill chunks included), so a block the prefix cache serves holds both models' KV.
//
// Per request the proposer only remembers how far its KV is valid: positions [0, valid) hold
// draft KV of the request's real tokens. Draft tokens it fed while proposing (at positions
// valid, valid+1, ...) stay valid as far as the target accepted them, which the next call sees
// by comparing them with the request's tokens; the rest is overwritten.
//
// One Propose() call per engine step: sub-step 1 is one ragged batch in which every request
// catches up on the tokens the target verified (ending at its newest token, whose logits give
// draft 1); sub-steps 2..k feed each request's previous draft to get the next one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "base/thread_pool.h"
#include "kv/kv_cache_storage.h"
#include "model/model_weights.h"
#include "pagellm/sampling_params.h"
#include "pagellm/status.h"
#include "sample/sampler.h"
#include "sample/sampler_state.h"
#include "spec/speculative_config.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

class DraftModelProposer {
 public:
  // One request's part of a step.
  struct Input {
    std::string request_id;
    // The request's tokens (prompt + outputs) after this step's verification.
    std::span<const int32_t> tokens;
    // Positions [0, num_target_computed) have target KV; the draft catches up to them.
    int32_t num_target_computed = 0;
    // Drafts wanted (0: only catch up). When > 0 the draft also feeds tokens.back() (position
    // tokens.size() - 1) and needs room in the block table for max_drafts - 1 more positions.
    int32_t max_drafts = 0;
    std::span<const int32_t> block_table;
    // Sampling of the drafts (the request's params; greedy = argmax).
    const SamplingParams* params = nullptr;
    int32_t num_prompt_tokens = 0;
    SamplerState* rng = nullptr;
  };
  struct Proposal {
    std::vector<int32_t> tokens;  // [d], d <= max_drafts
    // [d][vocab] the distributions the drafts were drawn from (empty for greedy requests).
    std::vector<float> probs;
  };

  // Loads the draft and checks that it shares the target's tokenizer (vocabulary size, every
  // piece string, BOS/EOS ids): InvalidArgument naming the first difference otherwise.
  static StatusOr<std::unique_ptr<DraftModelProposer>> Load(const SpeculativeConfig& config,
                                                            const LoadedModel& target,
                                                            const Tokenizer& target_tokenizer,
                                                            int32_t target_max_model_len);

  const LoadedModel& model() const { return *model_; }
  // Longest sequence the draft runs on: positions >= max_model_len() are never fed.
  int32_t max_model_len() const { return max_model_len_; }
  int64_t weights_bytes() const { return model_->weights.total_bytes; }
  // KV bytes of one token (all layers, K and V) in the draft's storage.
  int64_t kv_bytes_per_token() const;

  // Allocates the draft KV storage (num_blocks including the null block, same block_size as
  // the target) and, when num_swap_blocks > 0, its secondary pool; binds the backend.
  Status AllocateKv(int32_t block_size, int32_t num_blocks, int32_t num_swap_blocks,
                    ThreadPool* pool, std::span<const int32_t> eos_ids);

  // A request (re)starts with KV valid for its first num_computed positions (prefix hit, or
  // the positions a swap-in restored).
  void ResetRequest(const std::string& request_id, int32_t num_computed);
  void RemoveRequest(const std::string& request_id);
  // Mirrors the target's swap copies on the draft's storages.
  void SwapOutBlock(int32_t device_block, int32_t host_block);
  void SwapInBlock(int32_t host_block, int32_t device_block);
  void PoisonKvCache() { backend_->PoisonKvCache(); }

  // Runs the step's catch-up and proposal sub-steps; proposals[i] answers inputs[i].
  Status Propose(std::span<const Input> inputs, std::vector<Proposal>* proposals);

 private:
  struct RequestState {
    int32_t valid = 0;                // positions [0, valid) hold draft KV of real tokens
    std::vector<int32_t> fed_drafts;  // drafts fed at positions valid, valid + 1, ...
  };

  DraftModelProposer() = default;
  // Draws one draft from a logits row; appends its distribution to `probs` when random.
  int32_t DrawDraft(const float* logits, const Input& in, std::span<const int32_t> drafts,
                    Sampler& sampler, std::vector<float>& probs);

  std::unique_ptr<LoadedModel> model_;
  int32_t max_model_len_ = 0;
  ThreadPool* pool_ = nullptr;
  std::unique_ptr<Backend> backend_;  // owns the draft KV cache and its swap pool
  std::vector<Sampler> samplers_;     // one per pool thread
  std::vector<int32_t> eos_ids_;
  std::unordered_map<std::string, RequestState> states_;
  ForwardBatch batch_;
  ForwardOutput out_;
};

}  // namespace pagellm
