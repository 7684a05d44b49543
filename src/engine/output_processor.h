// OutputProcessor: turns sampled tokens into what the engine reports per request, and owns each
// request's state in the engine: one RequestState per request, in one table keyed by request
// id (the scheduler keeps the token and KV side, src/kv/request.h). Per request it runs the
// streaming detokenizer (src/tokenizer/tokenizer.h), the stop check
// (src/sample/stop_checker.h), the prompt logprobs and the finish reason.
//
// The engine core (src/engine/engine_core.cc) calls it per step:
//   OnScheduled      first-scheduled times (queue-time metrics)
//   WantsPromptLogits / ScorePromptTokens   after the forward, prompt logprobs
//   BeginOutput, AppendToken               per sampled request (parallel across requests)
//   Finish / Abort                         final fields; the request's state is dropped
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/finish_reason.h"
#include "base/forward_batch.h"
#include "engine/engine_output.h"
#include "grammar/grammar_matcher.h"
#include "pagellm/outputs.h"
#include "pagellm/sampling_params.h"
#include "sample/sampler.h"
#include "sample/sampler_state.h"
#include "sample/stop_checker.h"
#include "sched/scheduler_output.h"
#include "spec/speculative_decoder.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

// Everything the engine keeps about one request besides the scheduler's token / KV state.
struct RequestState {
  RequestState(const EngineRequest& r, SamplerState rng, StopChecker stop,
               const Tokenizer& tokenizer);

  SamplingParams params;
  SamplerState rng;  // the request's own generator: sampling, drafting and verification
  int32_t num_prompt_tokens;
  // When the scheduler first gave it tokens to compute (default-constructed until then).
  std::chrono::steady_clock::time_point first_scheduled{};
  IncrementalDetokenizer detok;
  StopChecker stop;
  std::vector<int32_t> prompt;  // kept only when prompt logprobs are wanted
  // [prompt tokens scored so far] entry k scores prompt token k (entry 0 is always empty).
  std::vector<std::optional<TokenLogprobEntry>> prompt_logprobs;
  bool prompt_logprobs_sent = false;
  SpecRequestState spec;  // speculative decoding's part (src/spec/speculative_decoder.h)
  // Structured outputs: the request's place in its grammar (null without a constraint) and
  // its token-mask buffers ([mask words], and [drafts + 1][mask words] when verifying).
  std::unique_ptr<GrammarMatcher> matcher;
  // Whether the matcher constrains the next token: not while the output reasons first
  // (SamplingParams::reasoning_boundary); kMayOpen: the first token may open the reasoning.
  enum class GrammarPhase : uint8_t { kActive, kReasoning, kMayOpen };
  GrammarPhase grammar_phase = GrammarPhase::kActive;
  std::vector<uint64_t> mask;
  std::vector<uint64_t> spec_masks;
};

class OutputProcessor {
 public:
  // eos_id: the primary EOS (-1 if none); eos_ids: every id that ends generation by default
  // (engine/generation_utils.h DefaultStopTokenIds).
  OutputProcessor(const Tokenizer& tokenizer, int32_t vocab_size, int32_t eos_id,
                  std::vector<int32_t> eos_ids);

  int32_t eos_id() const { return eos_id_; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  bool Contains(const std::string& request_id) const { return requests_.contains(request_id); }
  // The state of a new request. output_limit: StopChecker::OutputLimit; a request without a
  // seed draws its seed from `seeds` here, whether or not it is then admitted.
  std::unique_ptr<RequestState> NewState(const EngineRequest& request, int output_limit,
                                         SeedSource& seeds) const;
  // Takes over the state of an admitted request (its id is new).
  void Add(const std::string& request_id, std::unique_ptr<RequestState> state);
  // The state of a request that has one (CHECKed). Safe to call from several threads while no
  // request is added or removed.
  RequestState& Get(const std::string& request_id) const;

  // Stamps the first-scheduled time of requests scheduled for the first time.
  void OnScheduled(const SchedulerOutput& sched, std::chrono::steady_clock::time_point now);
  // Whether the forward must return the logits of every scheduled position of `r` (its prompt
  // logprobs are still being scored), not only the last.
  bool WantsPromptLogits(const ScheduledRequest& r) const;
  // Scores prompt tokens p + 1 with the logits of the rows at positions p of this step;
  // logits.row(first_row + j) belongs to position r.num_computed_tokens + j.
  void ScorePromptTokens(const ScheduledRequest& r, const ForwardOutput& logits, int32_t first_row,
                         Sampler& sampler);

  // Starts a sampled request's output of this step (its id; its prompt logprobs, once).
  void BeginOutput(const std::string& request_id, RequestState& st, EngineOutput& out) const;
  // Appends one generated token to the output: its logprob entry when the request asked for
  // logprobs (`logprob` is then non-null), and its text through the stop check. Returns
  // whether the request is finished by it (stop token, stop string, length limit).
  bool AppendToken(RequestState& st, int32_t token, const TokenLogprobEntry* logprob,
                   EngineOutput& out) const;
  // Fills the bookkeeping fields of a request's output of this step.
  void FillStats(const std::string& request_id, int32_t num_cached_tokens, int32_t num_preemptions,
                 EngineOutput& out) const;
  // A request the scheduler finished: the reason (the stop checker knows why; otherwise the
  // scheduler's cap `scheduler_reason`), the stop reason, and the text held back for a possible
  // stop string. Drops its state.
  void Finish(const std::string& request_id, FinishReason scheduler_reason, EngineOutput& out);
  // The final output of an aborted request; drops its state.
  EngineOutput Abort(const std::string& request_id);

 private:
  const Tokenizer& tokenizer_;
  int32_t vocab_size_;
  int32_t eos_id_;
  std::vector<int32_t> eos_ids_;
  std::unordered_map<std::string, std::unique_ptr<RequestState>> requests_;
};

}  // namespace pagellm
