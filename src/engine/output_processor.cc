#include "engine/output_processor.h"

#include <span>

#include "engine/generation_utils.h"
#include "pagellm/check.h"

namespace pagellm {

RequestState::RequestState(const EngineRequest& r, SamplerState rng_in, StopChecker stop_in,
                           const Tokenizer& tokenizer)
    : params(r.params),
      rng(std::move(rng_in)),
      num_prompt_tokens(static_cast<int32_t>(r.prompt_token_ids.size())),
      detok(tokenizer, r.prompt_token_ids, r.params.skip_special_tokens),
      stop(std::move(stop_in)) {
  if (params.prompt_logprobs.has_value()) {
    prompt = r.prompt_token_ids;
    prompt_logprobs.push_back(std::nullopt);  // position 0 has no preceding context
  }
}

OutputProcessor::OutputProcessor(const Tokenizer& tokenizer, int32_t vocab_size, int32_t eos_id,
                                 std::vector<int32_t> eos_ids)
    : tokenizer_(tokenizer),
      vocab_size_(vocab_size),
      eos_id_(eos_id),
      eos_ids_(std::move(eos_ids)) {}

std::unique_ptr<RequestState> OutputProcessor::NewState(const EngineRequest& r, int output_limit,
                                                        SeedSource& seeds) const {
  SamplerState rng(r.params.seed, seeds);
  return std::make_unique<RequestState>(
      r, std::move(rng), StopChecker(r.params, eos_id_, eos_ids_, output_limit), tokenizer_);
}

void OutputProcessor::Add(const std::string& request_id, std::unique_ptr<RequestState> state) {
  const bool inserted = requests_.emplace(request_id, std::move(state)).second;
  CHECK(inserted) << "request id '" << request_id << "' is already in use";
}

RequestState& OutputProcessor::Get(const std::string& request_id) const {
  auto it = requests_.find(request_id);
  CHECK(it != requests_.end()) << "no state for request '" << request_id << "'";
  return *it->second;
}

void OutputProcessor::OnScheduled(const SchedulerOutput& sched,
                                  std::chrono::steady_clock::time_point now) {
  for (const ScheduledRequest& r : sched.scheduled) {
    RequestState& st = Get(r.request_id);
    if (st.first_scheduled == std::chrono::steady_clock::time_point{}) st.first_scheduled = now;
  }
}

bool OutputProcessor::WantsPromptLogits(const ScheduledRequest& r) const {
  const RequestState& st = Get(r.request_id);
  return st.params.prompt_logprobs.has_value() && !st.prompt_logprobs_sent &&
         r.num_computed_tokens < st.num_prompt_tokens;
}

void OutputProcessor::ScorePromptTokens(const ScheduledRequest& sched, const ForwardOutput& logits,
                                        int32_t first_row, Sampler& sampler) {
  RequestState& st = Get(sched.request_id);
  const int n = *st.params.prompt_logprobs;
  for (int32_t j = 0; j < sched.num_scheduled_tokens; ++j) {
    const int32_t next = sched.num_computed_tokens + j + 1;
    if (next >= st.num_prompt_tokens) break;
    // A request preempted (recompute) mid-prompt recomputes positions it already scored: entry
    // k of prompt_logprobs belongs to prompt token k, so keep the first score of each.
    if (next < static_cast<int32_t>(st.prompt_logprobs.size())) continue;
    const SampleResult r = sampler.ScoreToken(
        std::span<const float>(logits.row(first_row + j), vocab_size_), st.prompt[next], n);
    st.prompt_logprobs.push_back(ToLogprobEntry(r));
  }
}

void OutputProcessor::BeginOutput(const std::string& request_id, RequestState& st,
                                  EngineOutput& out) const {
  out.request_id = request_id;
  if (st.params.prompt_logprobs.has_value() && !st.prompt_logprobs_sent) {
    out.prompt_logprobs = std::move(st.prompt_logprobs);
    st.prompt_logprobs_sent = true;
  }
}

bool OutputProcessor::AppendToken(RequestState& st, int32_t token, const TokenLogprobEntry* logprob,
                                  EngineOutput& out) const {
  out.new_token_ids.push_back(token);
  if (logprob != nullptr) out.new_logprobs.push_back(*logprob);
  const std::string piece = st.detok.Push(token);
  out.new_text += st.stop.Append(token, piece);
  return st.stop.finished();
}

void OutputProcessor::FillStats(const std::string& request_id, int32_t num_cached_tokens,
                                int32_t num_preemptions, EngineOutput& out) const {
  const RequestState& st = Get(request_id);
  out.num_prompt_tokens = st.num_prompt_tokens;
  out.num_cached_tokens = num_cached_tokens;
  out.num_preemptions = num_preemptions;
  out.first_scheduled_time = st.first_scheduled;
}

void OutputProcessor::Finish(const std::string& request_id, FinishReason scheduler_reason,
                             EngineOutput& out) {
  auto it = requests_.find(request_id);
  CHECK(it != requests_.end()) << "no state for request '" << request_id << "'";
  const RequestState& st = *it->second;
  out.finished = true;
  // The stop checker knows why (stop string vs token vs length); the scheduler only caps.
  if (st.stop.finished()) {
    out.finish_reason = *st.stop.finish_reason();
    out.stop_reason = StopReasonText(st.stop.stop_reason());
  } else {
    out.finish_reason = scheduler_reason;
  }
  // Release whatever text was held back for a possible stop string.
  const std::string& text = st.stop.text();
  out.new_text += text.substr(text.size() - st.stop.held_back());
  requests_.erase(it);
}

EngineOutput OutputProcessor::Abort(const std::string& request_id) {
  auto it = requests_.find(request_id);
  CHECK(it != requests_.end()) << "no state for request '" << request_id << "'";
  EngineOutput o;
  o.request_id = request_id;
  o.finished = true;
  o.finish_reason = FinishReason::kAbort;
  o.num_prompt_tokens = it->second->num_prompt_tokens;
  o.first_scheduled_time = it->second->first_scheduled;
  requests_.erase(it);
  return o;
}

}  // namespace pagellm
