#include "engine/engine_core.h"

#include <algorithm>
#include <cmath>

#include "backend/backend_factory.h"
#include "engine/generation_utils.h"
#include "engine/kv_cache_sizing.h"
#include "engine/kv_calibration.h"
#include "engine/model_session.h"
#include "fmt/format.h"
#include "sample/rejection_sampler.h"
#include "spdlog/spdlog.h"
#include "spec/speculative_config_parser.h"

namespace pagellm {

StatusOr<std::unique_ptr<EngineCore>> EngineCore::Create(const EngineConfig& config) {
  std::unique_ptr<EngineCore> e(new EngineCore());
  e->config_ = config;
  ASSIGN_OR_RETURN(e->model_, LoadModel(config.model));
  ASSIGN_OR_RETURN(e->tokenizer_, LoadTokenizerForModel(*e->model_));
  const ModelConfig& mc = e->model_->config;
  EngineConfig& c = e->config_;
  if (c.max_model_len <= 0) c.max_model_len = mc.max_position_embeddings;
  if (c.block_size < 1 || c.block_size > 256)
    return InvalidArgumentError(
        fmt::format("--block-size must be in [1, 256], got {}", c.block_size));
  c.scheduler.max_model_len = c.max_model_len;
  RETURN_IF_ERROR(ResolveSpeculativeConfig(c.speculative));
  if (c.speculative.method == "draft_model") {
    ASSIGN_OR_RETURN(e->draft_, DraftModelProposer::Load(c.speculative, *e->model_, *e->tokenizer_,
                                                         c.max_model_len));
    // The draft writes KV for drafts 1..k-1 past the newest token: k lookahead slots.
    c.scheduler.num_lookahead_tokens =
        std::max(c.scheduler.num_lookahead_tokens, c.speculative.num_speculative_tokens);
  } else if (c.speculative.method == "ngram") {
    // The rule only decides what is drafted (src/spec/ngram_proposer.h); the output does not
    // depend on it.
    e->ngram_ = std::make_unique<NgramProposer>(
        c.speculative.prompt_lookup_min, c.speculative.prompt_lookup_max,
        c.speculative.num_speculative_tokens,
        c.speculative.ngram_rule == "earliest" ? NgramRule::kEarliest : NgramRule::kVote);
  }
  RETURN_IF_ERROR(c.scheduler.Validate());

  ASSIGN_OR_RETURN(e->kv_report_, SizeKvCache(*e->model_, c, e->draft_.get()));
  const KvCacheReport& r = e->kv_report_;

  KvCacheShape shape;
  shape.num_layers = mc.num_layers;
  shape.num_kv_heads = mc.num_kv_heads;
  shape.head_dim = mc.head_dim;
  shape.block_size = c.block_size;
  shape.num_blocks = r.num_blocks + 1;  // + the null block 0
  shape.dtype = r.kv_format.storage_dtype;
  shape.skip_layers = r.kv_format.skip_layers;
  shape.skip_dtype = r.kv_format.skip_dtype;
  e->pool_ = std::make_unique<ThreadPool>(c.threads);
  e->samplers_.resize(e->pool_->num_threads());
  ASSIGN_OR_RETURN(e->backend_,
                   CreateBackend(*e->model_, BackendOptions(e->pool_.get(), c.max_model_len)));
  // The secondary pool has no null block.
  RETURN_IF_ERROR(
      e->backend_->AllocateKvCache(shape, r.num_swap_blocks >= 2 ? r.num_swap_blocks : 0));
  RETURN_IF_ERROR(CalibrateKvCache(*e->model_, *e->tokenizer_, c.max_model_len,
                                   c.calculate_kv_scales, &e->backend_->kv_cache(),
                                   e->pool_.get()));
  // The key space keeps prefix-cache entries of different models / cache layouts apart.
  KvCacheManager kv_manager(c.block_size, shape.num_blocks, c.enable_prefix_caching,
                            c.max_model_len, r.num_swap_blocks,
                            KvCacheKeySpace(e->backend_->kv_shape()));
  e->scheduler_ = std::make_unique<Scheduler>(c.scheduler, std::move(kv_manager));
  e->seeds_ = SeedSource(c.seed);

  e->eos_ids_ = DefaultStopTokenIds(e->tokenizer_.get(), mc, &e->eos_id_);
  if (e->draft_) {
    RETURN_IF_ERROR(e->draft_->AllocateKv(c.block_size, shape.num_blocks,
                                          r.num_swap_blocks >= 2 ? r.num_swap_blocks : 0,
                                          e->pool_.get(), e->eos_ids_));
  }
  if (c.speculative.enabled()) {
    e->verify_scratch_.resize(e->pool_->num_threads());
    DraftPolicyConfig pc;
    pc.adaptive = c.speculative.draft_policy != "fixed";
    pc.free_tokens = c.speculative.draft_free_tokens;
    e->draft_policy_ = AdaptiveDraftPolicy(pc);
    spdlog::info("speculative decoding: method {}, {} tokens per step ({}){}", c.speculative.method,
                 c.speculative.num_speculative_tokens,
                 pc.adaptive ? fmt::format("adaptive: per-request acceptance, no drafts in "
                                           "steps of >= {} tokens",
                                           pc.free_tokens)
                             : std::string("fixed"),
                 e->draft_ ? fmt::format(", draft max_model_len {}", e->draft_->max_model_len())
                           : fmt::format(", n-gram sizes {}..{}", c.speculative.prompt_lookup_min,
                                         c.speculative.prompt_lookup_max));
  }
  return e;
}

Status EngineCore::ValidateRequest(const EngineRequest& r) const {
  const ModelConfig& mc = model_->config;
  RETURN_IF_ERROR(r.params.Validate(mc.vocab_size));
  if (r.params.n != 1) return InvalidArgumentError("the engine core takes n = 1 requests");
  const int32_t len = static_cast<int32_t>(r.prompt_token_ids.size());
  if (len == 0) return InvalidArgumentError("prompt is empty");
  if (len >= max_model_len()) {
    return InvalidArgumentError(fmt::format(
        "This model's maximum context length is {} tokens. However, your request has {} input "
        "tokens ({} over the limit; at least one token must be left for the output).",
        max_model_len(), len, len - max_model_len() + 1));
  }
  for (int32_t id : r.prompt_token_ids)
    if (id < 0 || id >= mc.vocab_size)
      return InvalidArgumentError(fmt::format("token id {} is out of vocabulary", id));
  return Status::Ok();
}

Status EngineCore::AddRequest(EngineRequest r) {
  RETURN_IF_ERROR(ValidateRequest(r));
  if (states_.contains(r.request_id))
    return InvalidArgumentError(fmt::format("duplicate request id '{}'", r.request_id));
  const int32_t prompt_len = static_cast<int32_t>(r.prompt_token_ids.size());
  const int limit = StopChecker::OutputLimit(r.params, prompt_len, max_model_len());
  Request req(r.request_id, r.prompt_token_ids, limit);
  req.priority = r.priority;
  req.cache_salt = r.cache_salt;
  req.skip_prefix_cache = r.params.prompt_logprobs.has_value();
  auto state = std::unique_ptr<RequestState>(
      new RequestState{r.params, SamplerState(r.params.seed, seeds_), std::nullopt,
                       StopChecker(r.params, eos_id_, eos_ids_, limit), prompt_len,
                       /*first_scheduled=*/{}, /*prompt=*/{}, /*prompt_logprobs=*/{},
                       /*prompt_logprobs_sent=*/false, /*draft_probs=*/{}});
  state->detok.emplace(*tokenizer_, r.prompt_token_ids, r.params.skip_special_tokens);
  if (r.params.prompt_logprobs.has_value()) {
    state->prompt = r.prompt_token_ids;
    state->prompt_logprobs.push_back(std::nullopt);  // position 0 has no preceding context
  }
  RETURN_IF_ERROR(scheduler_->AddRequest(std::move(req)));
  states_.emplace(r.request_id, std::move(state));
  return Status::Ok();
}

void EngineCore::Abort(const std::string& request_id) {
  if (states_.contains(request_id)) pending_aborts_.push_back(request_id);
}

bool EngineCore::HasUnfinishedRequests() const {
  return scheduler_->has_unfinished_requests() || !pending_aborts_.empty();
}

void EngineCore::SampleRequest(const ScheduledRequest& sched, const float* logits, Sampler& sampler,
                               EngineOutput& out, SampledTokens& sampled) {
  RequestState& st = *states_.at(sched.request_id);
  const Request* req = scheduler_->GetRequest(sched.request_id);
  SamplingInput in{st.params, req->prompt_token_ids(), req->output_token_ids(), eos_ids_};
  SampleResult s =
      sampler.Sample(std::span<const float>(logits, model_->config.vocab_size), in, st.rng);
  out.request_id = sched.request_id;
  out.new_token_ids = {s.token};
  if (st.params.prompt_logprobs.has_value() && !st.prompt_logprobs_sent) {
    out.prompt_logprobs = std::move(st.prompt_logprobs);
    st.prompt_logprobs_sent = true;
  }
  if (st.params.logprobs.has_value()) out.new_logprobs.push_back(ToLogprobEntry(s));
  const std::string piece = st.detok->Push(s.token);
  out.new_text = st.stop.Append(s.token, piece);
  sampled.token_ids = {s.token};
  sampled.stop = st.stop.finished();
}

int32_t EngineCore::VerifyRequest(const ScheduledRequest& sched, int32_t first_row,
                                  Sampler& sampler, VerifyScratch& scratch, EngineOutput& out,
                                  SampledTokens& sampled, SpecDecodeStats& stats) {
  RequestState& st = *states_.at(sched.request_id);
  const Request* req = scheduler_->GetRequest(sched.request_id);
  const int32_t vocab = model_->config.vocab_size;
  const int32_t d = sched.num_spec_tokens;
  const std::span<const int32_t> drafts =
      std::span<const int32_t>(sched.token_ids).last(static_cast<size_t>(d));
  // Target distribution at each verified position; row j sees drafts[0..j) as outputs (for
  // penalties and min_tokens), as if the target had generated them.
  std::vector<int32_t>& outputs = scratch.outputs;
  outputs.assign(req->output_token_ids().begin(), req->output_token_ids().end());
  const size_t num_outputs = outputs.size();
  outputs.insert(outputs.end(), drafts.begin(), drafts.end());
  const bool greedy = Sampler::IsGreedy(st.params);
  RejectionResult rr;
  if (greedy) {
    // Only the target's greedy token per position matters: no probability rows.
    std::vector<int32_t>& targets = scratch.targets;
    targets.resize(static_cast<size_t>(d) + 1);
    for (int32_t j = 0; j <= d; ++j) {
      const SamplingInput in{st.params, req->prompt_token_ids(),
                             std::span<const int32_t>(outputs).first(num_outputs + j), eos_ids_};
      targets[j] =
          sampler.GreedyToken(std::span<const float>(forward_out_.row(first_row + j), vocab), in);
    }
    rr = VerifyGreedy(drafts, targets);
  } else {
    std::vector<float>& probs = scratch.probs;
    probs.resize(static_cast<size_t>(d + 1) * vocab);
    for (int32_t j = 0; j <= d; ++j) {
      const SamplingInput in{st.params, req->prompt_token_ids(),
                             std::span<const int32_t>(outputs).first(num_outputs + j), eos_ids_};
      sampler.ComputeProbs(std::span<const float>(forward_out_.row(first_row + j), vocab), in,
                           std::span<float>(probs.data() + int64_t{j} * vocab, vocab));
    }
    std::span<const float> draft_probs;
    if (!st.draft_probs.empty()) {
      CHECK_GE(st.draft_probs.size(), static_cast<size_t>(d) * vocab);
      draft_probs = std::span<const float>(st.draft_probs).first(static_cast<size_t>(d) * vocab);
    }
    rr = RejectionSample(drafts, draft_probs, probs, vocab, /*greedy=*/false, st.rng);
  }
  st.draft_probs.clear();
  stats.ObserveDraft(d, rr.num_accepted);

  out.request_id = sched.request_id;
  if (st.params.prompt_logprobs.has_value() && !st.prompt_logprobs_sent) {
    out.prompt_logprobs = std::move(st.prompt_logprobs);
    st.prompt_logprobs_sent = true;
  }
  // Token by token, as if sampled one per step: a stop token, stop string or the length limit
  // inside the accepted run ends it there.
  for (size_t j = 0; j < rr.tokens.size(); ++j) {
    const int32_t token = rr.tokens[j];
    out.new_token_ids.push_back(token);
    sampled.token_ids.push_back(token);
    if (st.params.logprobs.has_value()) {
      out.new_logprobs.push_back(ToLogprobEntry(sampler.ScoreToken(
          std::span<const float>(forward_out_.row(first_row + static_cast<int32_t>(j)), vocab),
          token, *st.params.logprobs)));
    }
    const std::string piece = st.detok->Push(token);
    out.new_text += st.stop.Append(token, piece);
    if (st.stop.finished()) break;
  }
  sampled.stop = st.stop.finished();
  return rr.num_accepted;
}

int32_t EngineCore::MaxDrafts(const Request& req) const {
  const int32_t num_tokens = req.num_tokens();
  int32_t d = config_.speculative.num_speculative_tokens;
  // Verification feeds positions num_tokens - 1 .. num_tokens - 1 + d, never max_model_len - 1.
  d = std::min(d, max_model_len() - 1 - num_tokens);
  // d drafts emit at most d + 1 tokens; more than the request may still generate is waste.
  d = std::min(d, req.max_tokens() - req.num_output_tokens() - 1);
  if (draft_) {
    // The draft feeds positions num_tokens - 1 .. num_tokens + d - 2.
    d = std::min(d, draft_->max_model_len() - num_tokens + 1);
  }
  return std::max(d, 0);
}

Status EngineCore::ProposeDrafts(const SchedulerOutput& sched, const SampledTokensMap& sampled) {
  std::vector<DraftModelProposer::Input> inputs;
  std::vector<std::vector<int32_t>> finished_tokens;  // tokens of requests gone this step
  finished_tokens.reserve(sched.scheduled.size());
  // Requests that may draft next step: their cap (k and the length limits; for n-gram the
  // proposal itself, proposed first since it is cheap) and, for the draft model, the index of
  // their input. The policy then decides how many of those drafts are worth verifying.
  struct Candidate {
    const std::string* request_id;
    int32_t cap;
    std::vector<int32_t> ngram;  // n-gram proposal (empty for the draft model)
    int64_t input = -1;          // index into `inputs` (draft model)
    // A sampled request with its own seed always drafts its cap: how many drafts are verified
    // decides how many random numbers it draws, and its output must not depend on the batch
    // it ran in (the adaptive allocation does). Greedy requests draw none.
    bool fixed = false;
  };
  std::vector<Candidate> cands;
  for (const ScheduledRequest& r : sched.scheduled) {
    const Request* req = scheduler_->GetRequest(r.request_id);
    if (req == nullptr || req->status != RequestStatus::kRunning) {
      // Finished this step: only catch the draft up on what the target computed, so the blocks
      // the prefix cache keeps hold draft KV too. Positions before r.num_computed_tokens are
      // already in the draft's cache and never read here.
      if (!draft_) continue;
      auto it = sampled.find(r.request_id);
      if (it == sampled.end()) continue;
      const std::vector<int32_t>& emitted = it->second.token_ids;
      std::vector<int32_t>& tokens = finished_tokens.emplace_back(r.num_computed_tokens, 0);
      const int32_t num_known = r.num_scheduled_tokens - r.num_spec_tokens;
      tokens.insert(tokens.end(), r.token_ids.begin(), r.token_ids.begin() + num_known);
      tokens.insert(tokens.end(), emitted.begin(), emitted.end());
      DraftModelProposer::Input in;
      in.request_id = r.request_id;
      in.tokens = tokens;
      in.num_target_computed = static_cast<int32_t>(tokens.size()) - 1;
      in.block_table = r.block_table;
      inputs.push_back(in);
      continue;
    }
    RequestState& st = *states_.at(r.request_id);
    st.draft_probs.clear();
    const int32_t max_drafts = r.samples ? MaxDrafts(*req) : 0;
    const bool seeded_random = !Sampler::IsGreedy(st.params) && st.params.seed.has_value();
    if (ngram_) {
      if (max_drafts > 0) {
        std::vector<int32_t> drafts = ngram_->Propose(req->all_token_ids(), max_drafts);
        if (!drafts.empty()) {
          const int32_t cap = static_cast<int32_t>(drafts.size());
          cands.push_back({&r.request_id, cap, std::move(drafts), -1, seeded_random});
        }
      }
      continue;
    }
    DraftModelProposer::Input in;
    in.request_id = r.request_id;
    in.tokens = req->all_token_ids();
    in.num_target_computed = req->num_computed_tokens;
    in.max_drafts = max_drafts;
    in.block_table = scheduler_->kv_cache_manager().BlockTable(r.request_id);
    in.params = &st.params;
    in.num_prompt_tokens = st.num_prompt_tokens;
    in.rng = &st.rng;
    if (max_drafts > 0)
      cands.push_back(
          {&r.request_id, max_drafts, {}, static_cast<int64_t>(inputs.size()), seeded_random});
    inputs.push_back(in);
  }
  if (!cands.empty()) {
    // The next step's tokens without drafts: one per running request, and a prefill chunk
    // (compute-bound: no cheap room for drafts) when a waiting request can be admitted.
    int32_t base_tokens = scheduler_->num_running();
    if (scheduler_->num_waiting() > 0 && base_tokens < config_.scheduler.max_num_seqs)
      base_tokens += static_cast<int32_t>(std::ceil(draft_policy_.config().free_tokens));
    std::vector<double> alphas(cands.size());
    std::vector<int32_t> caps(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
      alphas[i] = draft_policy_.Acceptance(*cands[i].request_id);
      // Fixed requests take their drafts first; the rest share what is left.
      caps[i] = cands[i].fixed ? 0 : cands[i].cap;
      if (cands[i].fixed) base_tokens += cands[i].cap;
    }
    std::vector<int32_t> alloc = draft_policy_.Allocate(alphas, caps, base_tokens);
    for (size_t i = 0; i < cands.size(); ++i)
      if (cands[i].fixed) alloc[i] = cands[i].cap;
    for (size_t i = 0; i < cands.size(); ++i) {
      Candidate& c = cands[i];
      if (c.input >= 0) {
        inputs[c.input].max_drafts = alloc[i];
      } else if (alloc[i] > 0) {
        c.ngram.resize(alloc[i]);
        scheduler_->SetSpecTokens(*c.request_id, std::move(c.ngram));
      }
    }
  }
  if (!draft_ || inputs.empty()) return Status::Ok();
  std::vector<DraftModelProposer::Proposal> proposals;
  RETURN_IF_ERROR(draft_->Propose(inputs, &proposals));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].max_drafts == 0 || proposals[i].tokens.empty()) continue;
    RequestState& st = *states_.at(inputs[i].request_id);
    st.draft_probs = std::move(proposals[i].probs);
    scheduler_->SetSpecTokens(inputs[i].request_id, std::move(proposals[i].tokens));
  }
  return Status::Ok();
}

void EngineCore::ScorePromptTokens(const ScheduledRequest& sched, int32_t first_row,
                                   Sampler& sampler) {
  RequestState& st = *states_.at(sched.request_id);
  const int n = *st.params.prompt_logprobs;
  for (int32_t j = 0; j < sched.num_scheduled_tokens; ++j) {
    const int32_t next = sched.num_computed_tokens + j + 1;
    if (next >= st.num_prompt_tokens) break;
    // A request preempted (recompute) mid-prompt recomputes positions it already scored: entry
    // k of prompt_logprobs belongs to prompt token k, so keep the first score of each.
    if (next < static_cast<int32_t>(st.prompt_logprobs.size())) continue;
    const SampleResult r = sampler.ScoreToken(
        std::span<const float>(forward_out_.row(first_row + j), model_->config.vocab_size),
        st.prompt[next], n);
    st.prompt_logprobs.push_back(ToLogprobEntry(r));
  }
}

StatusOr<std::vector<EngineOutput>> EngineCore::Step() {
  std::vector<EngineOutput> outputs;
  // Aborts first: their blocks are free for this step's schedule.
  if (!pending_aborts_.empty()) {
    for (const std::string& id : pending_aborts_) {
      auto it = states_.find(id);
      if (it == states_.end()) continue;
      scheduler_->Abort(id);
      EngineOutput o;
      o.request_id = id;
      o.finished = true;
      o.finish_reason = "abort";
      o.num_prompt_tokens = it->second->num_prompt_tokens;
      o.first_scheduled_time = it->second->first_scheduled;
      outputs.push_back(std::move(o));
      states_.erase(it);
      draft_policy_.Remove(id);
      if (draft_) draft_->RemoveRequest(id);
    }
    pending_aborts_.clear();
  }
  SchedulerOutput sched = scheduler_->Schedule();
  last_step_num_tokens_ = 0;
  if (!sched.has_work()) {
    scheduler_->UpdateFromOutput(sched, {});
    return outputs;
  }
  ++num_steps_;
  last_step_num_tokens_ = sched.total_num_scheduled_tokens;
  const auto now = std::chrono::steady_clock::now();
  for (const ScheduledRequest& r : sched.scheduled) {
    RequestState& st = *states_.at(r.request_id);
    if (st.first_scheduled == std::chrono::steady_clock::time_point{}) st.first_scheduled = now;
  }
  backend_->SwapKvBlocks(sched.swap_out, sched.swap_in);
  if (draft_) {
    // The draft's cache follows the target's block tables, so it moves with them.
    for (const BlockCopy& c : sched.swap_out) draft_->SwapOutBlock(c.src, c.dst);
    for (const BlockCopy& c : sched.swap_in) draft_->SwapInBlock(c.src, c.dst);
    for (const ScheduledRequest& r : sched.scheduled)
      if (r.is_new) draft_->ResetRequest(r.request_id, r.num_computed_tokens);
  }

  batch_.token_ids.clear();
  batch_.seqs.clear();
  for (const ScheduledRequest& r : sched.scheduled) {
    batch_.token_ids.insert(batch_.token_ids.end(), r.token_ids.begin(), r.token_ids.end());
    // Prompt logprobs need the logits of every prompt position, not only the last.
    const RequestState& st = *states_.at(r.request_id);
    const bool all_logits = st.params.prompt_logprobs.has_value() && !st.prompt_logprobs_sent &&
                            r.num_computed_tokens < st.num_prompt_tokens;
    // Verifying d drafts needs the logits of the last d + 1 positions.
    batch_.seqs.push_back({r.num_scheduled_tokens, r.num_computed_tokens, r.block_table,
                           all_logits || r.num_spec_tokens > 0});
  }
  RETURN_IF_ERROR(backend_->Forward(batch_, &forward_out_));

  for (size_t i = 0; i < sched.scheduled.size(); ++i) {
    // (Speculative verification also asks for all logits; only prompt positions are scored.)
    if (batch_.seqs[i].all_logits &&
        states_.at(sched.scheduled[i].request_id)->params.prompt_logprobs.has_value())
      ScorePromptTokens(sched.scheduled[i], forward_out_.row_offset[i], samplers_[0]);
  }
  // Sample the requests that reached the end of their known tokens, in parallel (each has
  // its own RNG and state; one Sampler's scratch per thread). A chunk with all logits samples
  // from its last row.
  std::vector<int32_t> sampling;
  for (size_t i = 0; i < sched.scheduled.size(); ++i)
    if (sched.scheduled[i].samples) sampling.push_back(static_cast<int32_t>(i));
  std::vector<EngineOutput> step_out(sampling.size());
  std::vector<SampledTokens> sampled(sampling.size());
  std::vector<SpecDecodeStats> spec_stats(sampling.size());
  std::vector<int32_t> num_accepted(sampling.size(), 0);
  pool_->Run(static_cast<int64_t>(sampling.size()), [&](int64_t k, int thread) {
    const int32_t i = sampling[k];
    const ScheduledRequest& r = sched.scheduled[i];
    const int32_t last_row = forward_out_.row_offset[i] +
                             (batch_.seqs[i].all_logits ? batch_.seqs[i].num_tokens - 1 : 0);
    if (r.num_spec_tokens > 0) {
      num_accepted[k] =
          VerifyRequest(r, last_row - r.num_spec_tokens, samplers_[thread], verify_scratch_[thread],
                        step_out[k], sampled[k], spec_stats[k]);
    } else {
      SampleRequest(r, forward_out_.row(last_row), samplers_[thread], step_out[k], sampled[k]);
    }
  });
  for (const SpecDecodeStats& s : spec_stats) spec_stats_.Merge(s);
  for (size_t k = 0; k < sampling.size(); ++k) {
    const ScheduledRequest& r = sched.scheduled[sampling[k]];
    if (r.num_spec_tokens > 0)
      draft_policy_.Observe(r.request_id, r.num_spec_tokens, num_accepted[k]);
  }
  SampledTokensMap sampled_map;
  for (size_t k = 0; k < sampling.size(); ++k)
    sampled_map.emplace(step_out[k].request_id, std::move(sampled[k]));

  std::vector<RequestUpdate> updates = scheduler_->UpdateFromOutput(sched, sampled_map);
  std::unordered_map<std::string, size_t> index;
  for (size_t k = 0; k < step_out.size(); ++k) index.emplace(step_out[k].request_id, k);
  for (const RequestUpdate& u : updates) {
    auto it = index.find(u.request_id);
    if (it == index.end()) continue;
    EngineOutput& o = step_out[it->second];
    RequestState& st = *states_.at(u.request_id);
    o.num_prompt_tokens = st.num_prompt_tokens;
    o.num_cached_tokens = u.num_cached_tokens;
    o.num_preemptions = u.num_preemptions;
    o.first_scheduled_time = st.first_scheduled;
    if (u.finished()) {
      o.finished = true;
      // The stop checker knows why (stop string vs token vs length); the scheduler only caps.
      if (st.stop.finished()) {
        o.finish_reason = FinishReasonName(*st.stop.finish_reason());
        o.stop_reason = StopReasonText(st.stop.stop_reason());
      } else {
        o.finish_reason = std::string(FinishReasonName(u.status));
      }
      // Release whatever text was held back for a possible stop string.
      const std::string& text = st.stop.text();
      o.new_text += text.substr(text.size() - st.stop.held_back());
      states_.erase(u.request_id);
      draft_policy_.Remove(u.request_id);
    }
  }
  for (EngineOutput& o : step_out) outputs.push_back(std::move(o));
  if (config_.speculative.enabled()) {
    RETURN_IF_ERROR(ProposeDrafts(sched, sampled_map));
    if (draft_) {
      for (const RequestUpdate& u : updates)
        if (u.finished()) draft_->RemoveRequest(u.request_id);
    }
  }
  return outputs;
}

EngineStats EngineCore::stats() const {
  EngineStats s;
  s.num_running = scheduler_->num_running();
  s.num_waiting = scheduler_->num_waiting();
  s.num_swapped = scheduler_->num_swapped();
  s.num_preemptions = scheduler_->num_preemptions();
  const KvCacheManager& kv = scheduler_->kv_cache_manager();
  s.kv_usage = kv.Usage();
  s.swap_usage = kv.swap_enabled() ? kv.secondary_pool().Usage() : 0.0;
  s.prefix_cache_queries = kv.prefix_cache_stats().queries;
  s.prefix_cache_hits = kv.prefix_cache_stats().hits;
  s.num_steps = num_steps_;
  s.num_speculative_tokens =
      config_.speculative.enabled() ? config_.speculative.num_speculative_tokens : 0;
  s.spec_decode = spec_stats_;
  s.num_free_blocks = kv.num_free_blocks();
  s.num_usable_blocks = kv.block_pool().num_usable_blocks();
  for (const std::string& id : scheduler_->RunningIds()) {
    const Request* r = scheduler_->GetRequest(id);
    s.kv_slots_allocated += static_cast<int64_t>(kv.BlockTable(id).size()) * kv.block_size();
    s.kv_slots_used += r->num_computed_tokens;
  }
  return s;
}

}  // namespace pagellm
