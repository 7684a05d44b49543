#include "engine/engine_core.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "backend/backend_factory.h"
#include "engine/generation_utils.h"
#include "engine/grammar_vocabulary.h"
#include "engine/kv_cache_sizing.h"
#include "engine/kv_calibration.h"
#include "engine/model_session.h"
#include "fmt/format.h"
#include "model/gguf_file.h"
#include "model/safetensors_file.h"
#include "planner/cpu_plan.h"
#include "spec/speculative_config_parser.h"

namespace pagellm {

StatusOr<std::unique_ptr<EngineCore>> EngineCore::Create(const EngineConfig& config) {
  ASSIGN_OR_RETURN(
      std::unique_ptr<LoadedModel> model,
      LoadModel(config.model, LoadOptions{config.float_matrix_dtype, config.quantization}));
  std::unique_ptr<Tokenizer> tokenizer;
  if (config.tokenizer.empty()) {
    ASSIGN_OR_RETURN(tokenizer, LoadTokenizerForModel(*model));
  } else {
    auto loaded = LoadTokenizerFromDir(config.tokenizer);
    if (!loaded.ok()) return loaded.status().WithContext("--tokenizer " + config.tokenizer);
    tokenizer = std::move(loaded).value();
  }
  return Build(config, std::move(model), std::move(tokenizer), nullptr);
}

StatusOr<std::unique_ptr<EngineCore>> EngineCore::Create(const EngineConfig& config,
                                                         const ModelConfig& model_config,
                                                         std::unique_ptr<Tokenizer> tokenizer,
                                                         std::unique_ptr<Backend> backend) {
  CHECK(tokenizer != nullptr && backend != nullptr);
  auto model = std::make_unique<LoadedModel>();
  model->config = model_config;
  return Build(config, std::move(model), std::move(tokenizer), std::move(backend));
}

StatusOr<std::unique_ptr<EngineCore>> EngineCore::Build(const EngineConfig& config,
                                                        std::unique_ptr<LoadedModel> model,
                                                        std::unique_ptr<Tokenizer> tokenizer,
                                                        std::unique_ptr<Backend> backend) {
  std::unique_ptr<EngineCore> e(new EngineCore());
  e->config_ = config;
  e->model_ = std::move(model);
  e->tokenizer_ = std::move(tokenizer);
  const ModelConfig& mc = e->model_->config;
  EngineConfig& c = e->config_;
  if (c.max_model_len <= 0) c.max_model_len = mc.max_position_embeddings;
  if (c.max_model_len > mc.max_position_embeddings && mc.max_position_embeddings > 0 &&
      !c.allow_long_max_model_len)
    return InvalidArgumentError(fmt::format(
        "User-specified max_model_len ({}) is greater than the derived max_model_len "
        "(max_position_embeddings={} in model's config.json). To allow overriding this maximum, "
        "set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be "
        "used with extreme caution: positions beyond max_position_embeddings were never trained "
        "on.",
        c.max_model_len, mc.max_position_embeddings));
  if (c.block_size < 1 || c.block_size > 256)
    return InvalidArgumentError(
        fmt::format("--block-size must be in [1, 256], got {}", c.block_size));
  c.scheduler.max_model_len = c.max_model_len;
  RETURN_IF_ERROR(ResolveSpeculativeConfig(c.speculative));
  if (c.speculative.enabled()) {
    ASSIGN_OR_RETURN(e->spec_,
                     SpeculativeDecoder::Create(c.speculative, *e->model_, *e->tokenizer_,
                                                c.max_model_len, c.scheduler.max_num_seqs));
    c.scheduler.num_lookahead_tokens =
        std::max(c.scheduler.num_lookahead_tokens, e->spec_->num_lookahead_tokens());
  }
  RETURN_IF_ERROR(c.scheduler.Validate());
  const int ranks = c.tensor_parallel_size * c.pipeline_parallel_size;
  if (c.tensor_parallel_size < 1 || c.pipeline_parallel_size < 1)
    return InvalidArgumentError("--tensor-parallel-size and --pipeline-parallel-size must be >= 1");
  if (ranks > 1 && (c.tensor_parallel_group == nullptr || c.tensor_parallel_group->size() != ranks))
    return FailedPreconditionError(fmt::format(
        "--tensor-parallel-size {} x --pipeline-parallel-size {}: this process is not rank 0 of "
        "a group of {} processes (pagellm starts them itself through mpirun; "
        "docs/PARALLELISM.md)",
        c.tensor_parallel_size, c.pipeline_parallel_size, ranks));

  ASSIGN_OR_RETURN(e->kv_report_,
                   SizeKvCache(*e->model_, c, e->spec_ ? e->spec_->draft_model() : nullptr));
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
  if (!r.kv_group_windows.empty()) {
    const KvCacheGroups groups = CpuKvCacheGroups(mc, r.kv_format, true);
    CHECK(groups.windows() == r.kv_group_windows) << "plan and engine disagree on KV groups";
    shape.layer_region = groups.layer_region;
    shape.layer_group = groups.layer_group;
  }
  e->pool_ = std::make_unique<ThreadPool>(c.threads);
  e->samplers_.resize(e->pool_->num_threads());
  if (backend != nullptr) {
    e->backend_ = std::move(backend);
  } else {
    BackendOptions options(e->pool_.get(), c.max_model_len);
    options.tensor_parallel_group = ranks > 1 ? c.tensor_parallel_group : nullptr;
    options.pipeline.pipeline_parallel_size = c.pipeline_parallel_size;
    options.pipeline.layer_partition = c.pipeline_layer_partition;
    ASSIGN_OR_RETURN(e->backend_, CreateBackend(*e->model_, options));
  }
  // The secondary pool has no null block.
  RETURN_IF_ERROR(
      e->backend_->AllocateKvCache(shape, r.num_swap_blocks >= 2 ? r.num_swap_blocks : 0));
  RETURN_IF_ERROR(CalibrateKvCache(*e->model_, *e->tokenizer_, c.max_model_len,
                                   c.calculate_kv_scales, e->backend_.get(), e->pool_.get()));
  // The key space keeps prefix-cache entries of different models / cache layouts apart.
  KvCacheManager kv_manager(c.block_size, shape.num_blocks, c.enable_prefix_caching,
                            c.max_model_len, r.num_swap_blocks,
                            KvCacheKeySpace(e->backend_->model_kv_shape()), r.kv_group_windows);
  e->scheduler_ = std::make_unique<Scheduler>(c.scheduler, std::move(kv_manager));
  e->seeds_ = SeedSource(c.seed);

  int32_t eos_id = -1;
  std::vector<int32_t> eos_ids = DefaultStopTokenIds(e->tokenizer_.get(), mc, &eos_id);
  if (e->spec_) {
    RETURN_IF_ERROR(e->spec_->Allocate(c.block_size, shape.num_blocks,
                                       r.num_swap_blocks >= 2 ? r.num_swap_blocks : 0,
                                       e->pool_.get(), eos_ids));
  }
  e->eos_ids_ = eos_ids;
  e->output_ =
      std::make_unique<OutputProcessor>(*e->tokenizer_, mc.vocab_size, eos_id, std::move(eos_ids));
  return e;
}

Status EngineCore::ValidateRequest(const EngineRequest& r) const {
  const ModelConfig& mc = model_->config;
  RETURN_IF_ERROR(r.params.Validate(mc.vocab_size, config_.max_logprobs));
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
  if (r.params.structured_outputs.has_value()) {
    RETURN_IF_ERROR(CompileConstraint(*r.params.structured_outputs).status());
  }
  return Status::Ok();
}

StatusOr<std::shared_ptr<const CompiledGrammar>> EngineCore::CompileConstraint(
    const StructuredOutputs& spec) const {
  std::call_once(grammar_once_, [this] {
    grammar_ = std::make_unique<GrammarCompiler>(
        BuildTokenVocabulary(*tokenizer_, model_->config.vocab_size, eos_ids_));
  });
  return grammar_->Compile(spec);
}

Status EngineCore::AddRequest(EngineRequest r) {
  RETURN_IF_ERROR(ValidateRequest(r));
  if (output_->Contains(r.request_id))
    return InvalidArgumentError(fmt::format("duplicate request id '{}'", r.request_id));
  const int32_t prompt_len = static_cast<int32_t>(r.prompt_token_ids.size());
  const int limit = StopChecker::OutputLimit(r.params, prompt_len, max_model_len());
  Request req(r.request_id, r.prompt_token_ids, limit);
  req.priority = r.priority;
  req.cache_salt = r.cache_salt;
  req.skip_prefix_cache = r.params.prompt_logprobs.has_value();
  std::unique_ptr<RequestState> state = output_->NewState(r, limit, seeds_);
  if (r.params.structured_outputs.has_value()) {
    ASSIGN_OR_RETURN(std::shared_ptr<const CompiledGrammar> grammar,
                     CompileConstraint(*r.params.structured_outputs));
    state->matcher = std::make_unique<GrammarMatcher>(std::move(grammar));
    state->mask.resize(state->matcher->grammar().vocab().mask_words());
    if (const auto& b = r.params.reasoning_boundary) {
      using Phase = RequestState::GrammarPhase;
      state->grammar_phase = b->starts_inside      ? Phase::kReasoning
                             : b->start_token >= 0 ? Phase::kMayOpen
                                                   : Phase::kActive;
    }
  }
  RETURN_IF_ERROR(scheduler_->AddRequest(std::move(req)));
  output_->Add(r.request_id, std::move(state));
  return Status::Ok();
}

void EngineCore::Abort(const std::string& request_id) {
  if (output_->Contains(request_id)) pending_aborts_.push_back(request_id);
}

bool EngineCore::HasUnfinishedRequests() const {
  return scheduler_->has_unfinished_requests() || !pending_aborts_.empty();
}

StatusOr<std::vector<EngineOutput>> EngineCore::Step() {
  std::vector<EngineOutput> outputs = ProcessAborts();
  SchedulerOutput sched = scheduler_->Schedule();
  last_step_num_tokens_ = 0;
  if (!sched.has_work()) {
    scheduler_->UpdateFromOutput(sched, {});
    return outputs;
  }
  ++num_steps_;
  last_step_num_tokens_ = sched.total_num_scheduled_tokens;
  output_->OnScheduled(sched, std::chrono::steady_clock::now());
  backend_->SwapKvBlocks(sched.swap_out, sched.swap_in);
  if (spec_) spec_->OnScheduled(sched);
  RETURN_IF_ERROR(Execute(sched));
  StepSamples samples = Sample(sched);
  const std::vector<std::string> finished = Update(sched, samples, outputs);
  if (spec_) RETURN_IF_ERROR(Speculate(sched, samples.tokens, finished));
  return outputs;
}

std::vector<EngineOutput> EngineCore::ProcessAborts() {
  std::vector<EngineOutput> outputs;
  for (const std::string& id : pending_aborts_) {
    // Aborted twice, or finished before its abort was processed: nothing left to abort.
    if (!output_->Contains(id)) continue;
    scheduler_->Abort(id);
    outputs.push_back(output_->Abort(id));
    if (spec_) spec_->RemoveRequest(id);
  }
  pending_aborts_.clear();
  return outputs;
}

Status EngineCore::Execute(const SchedulerOutput& sched) {
  batch_.token_ids.clear();
  batch_.seqs.clear();
  for (size_t i = 0; i < sched.scheduled.size(); ++i) {
    const ScheduledRequest& r = sched.scheduled[i];
    batch_.token_ids.insert(batch_.token_ids.end(), r.token_ids.begin(), r.token_ids.end());
    // Prompt logprobs need the logits of every prompt position, not only the last; verifying d
    // drafts needs those of the last d + 1 positions.
    SequenceChunk& s = batch_.seqs.emplace_back();
    s.num_tokens = r.num_scheduled_tokens;
    s.start_pos = r.num_computed_tokens;
    s.block_table = r.block_table;
    s.group_block_tables = r.group_block_tables;
    s.all_logits = output_->WantsPromptLogits(r) || r.num_spec_tokens > 0;
  }
  const auto forward_start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(backend_->Forward(batch_, &forward_out_));
  if (config_.tensor_parallel_size > 1) {
    ++tp_forward_steps_;
    tp_forward_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - forward_start).count();
    tp_comm_seconds_ += forward_out_.comm_seconds;
    tp_all_reduce_seconds_ += forward_out_.all_reduce_seconds;
    tp_all_reduces_ += forward_out_.num_all_reduces;
  }
  // (The forward changed no request state, so the question is asked again, not stored.)
  for (size_t i = 0; i < sched.scheduled.size(); ++i) {
    if (output_->WantsPromptLogits(sched.scheduled[i]))
      output_->ScorePromptTokens(sched.scheduled[i], forward_out_, forward_out_.row_offset[i],
                                 samplers_[0]);
  }
  return Status::Ok();
}

EngineCore::StepSamples EngineCore::Sample(const SchedulerOutput& sched) {
  // Each request has its own RNG and state, and each thread its own Sampler scratch, so the
  // requests sample in parallel. A chunk with all logits samples from its last row.
  StepSamples s;
  for (size_t i = 0; i < sched.scheduled.size(); ++i)
    if (sched.scheduled[i].samples) s.index.push_back(static_cast<int32_t>(i));
  s.outputs.resize(s.index.size());
  std::vector<int32_t> num_accepted(s.index.size(), 0);
  pool_->Run(static_cast<int64_t>(s.index.size()), [&](int64_t k, int thread) {
    const int32_t i = s.index[k];
    const int32_t last_row = forward_out_.row_offset[i] +
                             (batch_.seqs[i].all_logits ? batch_.seqs[i].num_tokens - 1 : 0);
    num_accepted[k] = SampleRequest(sched.scheduled[i], last_row, thread, s.outputs[k]);
  });
  for (size_t k = 0; k < s.index.size(); ++k) {
    const ScheduledRequest& r = sched.scheduled[s.index[k]];
    if (r.num_spec_tokens > 0) spec_->Observe(r.request_id, r.num_spec_tokens, num_accepted[k]);
    SampledTokens tokens;
    tokens.token_ids = s.outputs[k].new_token_ids;
    tokens.stop = output_->Get(r.request_id).stop.finished();
    s.tokens.emplace(r.request_id, std::move(tokens));
  }
  return s;
}

int32_t EngineCore::SampleRequest(const ScheduledRequest& sched, int32_t last_row, int thread,
                                  EngineOutput& out) {
  RequestState& st = output_->Get(sched.request_id);
  const Request& req = *scheduler_->GetRequest(sched.request_id);
  Sampler& sampler = samplers_[thread];
  const int32_t vocab = model_->config.vocab_size;
  using Phase = RequestState::GrammarPhase;
  // Reasoning ahead of the constraint (SamplingParams::reasoning_boundary): its tokens are
  // sampled freely, and the matcher starts after the end token.
  const bool reasoning = st.matcher && st.grammar_phase == Phase::kReasoning;
  const auto leave_reasoning = [&](int32_t token) {
    if (token == st.params.reasoning_boundary->end_token) st.grammar_phase = Phase::kActive;
  };
  if (sched.num_spec_tokens == 0 && reasoning) {
    SamplingInput in{st.params, req.prompt_token_ids(), req.output_token_ids(), output_->eos_ids()};
    const SampleResult s =
        sampler.Sample(std::span<const float>(forward_out_.row(last_row), vocab), in, st.rng);
    output_->BeginOutput(sched.request_id, st, out);
    const TokenLogprobEntry logprob =
        st.params.logprobs.has_value() ? ToLogprobEntry(s) : TokenLogprobEntry{};
    output_->AppendToken(st, s.token, st.params.logprobs.has_value() ? &logprob : nullptr, out);
    leave_reasoning(s.token);
    return 0;
  }
  if (sched.num_spec_tokens == 0) {
    SamplingInput in{st.params, req.prompt_token_ids(), req.output_token_ids(), output_->eos_ids()};
    const bool may_open = st.matcher && st.grammar_phase == Phase::kMayOpen;
    int32_t open_token = -1;
    if (may_open) {
      // The first token either opens the reasoning or is the constrained output's first.
      open_token = st.params.reasoning_boundary->start_token;
      FillGrammarMask(st, st.mask);
      st.mask[open_token >> 6] |= uint64_t{1} << (open_token & 63);
    } else if (st.matcher && !FillGrammarMask(st, st.mask)) {
      // The constraint admits no token here: end the request (with EOS as its last token).
      output_->BeginOutput(sched.request_id, st, out);
      output_->AppendToken(st, std::max(output_->eos_id(), 0), nullptr, out);
      st.stop.FinishByConstraint();
      return 0;
    }
    if (st.matcher) in.allowed_tokens = st.mask;
    const SampleResult s =
        sampler.Sample(std::span<const float>(forward_out_.row(last_row), vocab), in, st.rng);
    output_->BeginOutput(sched.request_id, st, out);
    const TokenLogprobEntry logprob =
        st.params.logprobs.has_value() ? ToLogprobEntry(s) : TokenLogprobEntry{};
    if (may_open) {
      st.grammar_phase = s.token == open_token ? Phase::kReasoning : Phase::kActive;
      if (s.token == open_token) {
        output_->AppendToken(st, s.token, st.params.logprobs.has_value() ? &logprob : nullptr, out);
        return 0;
      }
    }
    // A token outside the mask is possible only when min_tokens masked every allowed one.
    const bool accepted = !st.matcher || st.matcher->AcceptToken(s.token);
    output_->AppendToken(st, s.token, st.params.logprobs.has_value() ? &logprob : nullptr, out);
    if (st.matcher && (!accepted || st.matcher->IsTerminated())) st.stop.FinishByConstraint();
    return 0;
  }
  // Speculative decoding: rows [first_row, last_row] verify the drafts; the emitted tokens go
  // through the stop check one by one, as if sampled one per step, so a stop token, stop string
  // or the length limit inside the accepted run ends it there.
  const int32_t first_row = last_row - sched.num_spec_tokens;
  const SpecRequestRef ref{&st.params, &st.rng, st.num_prompt_tokens, &st.spec};
  const std::span<const int32_t> drafts =
      std::span<const int32_t>(sched.token_ids).last(static_cast<size_t>(sched.num_spec_tokens));
  if (st.matcher && st.grammar_phase == Phase::kActive) {
    FillDraftMasks(st, drafts);
  } else if (st.matcher && st.grammar_phase == Phase::kMayOpen) {
    // Row 0 also admits the opening token; after a drafted one the drafts reason freely.
    const int32_t open_token = st.params.reasoning_boundary->start_token;
    if (drafts[0] == open_token) {
      st.spec_masks.assign((drafts.size() + 1) * st.mask.size(), ~uint64_t{0});
      FillGrammarMask(st, std::span<uint64_t>(st.spec_masks.data(), st.mask.size()));
    } else {
      FillDraftMasks(st, drafts);
    }
    st.spec_masks[open_token >> 6] |= uint64_t{1} << (open_token & 63);
  } else {
    st.spec_masks.clear();
  }
  const RejectionResult rr = spec_->Verify(sched, req, ref, output_->eos_ids(), forward_out_,
                                           first_row, vocab, sampler, thread, st.spec_masks);
  output_->BeginOutput(sched.request_id, st, out);
  for (size_t j = 0; j < rr.tokens.size(); ++j) {
    const int32_t token = rr.tokens[j];
    TokenLogprobEntry logprob;
    if (st.params.logprobs.has_value()) {
      logprob = ToLogprobEntry(sampler.ScoreToken(
          std::span<const float>(forward_out_.row(first_row + static_cast<int32_t>(j)), vocab),
          token, *st.params.logprobs));
    }
    if (st.matcher && st.grammar_phase == Phase::kMayOpen) {
      st.grammar_phase =
          token == st.params.reasoning_boundary->start_token ? Phase::kReasoning : Phase::kActive;
      if (st.grammar_phase == Phase::kReasoning) {
        if (output_->AppendToken(st, token, st.params.logprobs.has_value() ? &logprob : nullptr,
                                 out))
          break;
        continue;
      }
    }
    if (st.matcher && st.grammar_phase == Phase::kReasoning) {
      // The tokens after the end of the reasoning were verified unconstrained: they are
      // dropped (rejected) and sampled again under the grammar.
      const bool done =
          output_->AppendToken(st, token, st.params.logprobs.has_value() ? &logprob : nullptr, out);
      leave_reasoning(token);
      if (done || st.grammar_phase == Phase::kActive) break;
      continue;
    }
    const bool accepted = !st.matcher || st.matcher->AcceptToken(token);
    const bool done =
        output_->AppendToken(st, token, st.params.logprobs.has_value() ? &logprob : nullptr, out);
    if (st.matcher && (!accepted || st.matcher->IsTerminated())) {
      st.stop.FinishByConstraint();
      break;
    }
    if (done) break;
  }
  return rr.num_accepted;
}

bool EngineCore::FillGrammarMask(RequestState& st, std::span<uint64_t> mask) {
  const auto start = std::chrono::steady_clock::now();
  st.matcher->FillMask(mask);
  grammar_mask_ns_.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count(),
      std::memory_order_relaxed);
  grammar_masks_.fetch_add(1, std::memory_order_relaxed);
  return std::any_of(mask.begin(), mask.end(), [](uint64_t w) { return w != 0; });
}

void EngineCore::FillDraftMasks(RequestState& st, std::span<const int32_t> drafts) {
  const size_t words = st.mask.size();
  st.spec_masks.assign((drafts.size() + 1) * words, 0);
  // Row j is the mask after drafts [0, j). Past the first draft the grammar forbids, the
  // verifier rejects that draft and never reads later rows, which stay all-zero.
  int advanced = 0;
  for (size_t j = 0; j <= drafts.size(); ++j) {
    const std::span<uint64_t> row(st.spec_masks.data() + j * words, words);
    FillGrammarMask(st, row);
    if (j == drafts.size()) break;
    const int32_t d = drafts[j];
    const bool allowed = (row[d >> 6] >> (d & 63)) & 1;
    if (!allowed || !st.matcher->AcceptToken(d)) break;
    ++advanced;
  }
  st.matcher->Rollback(advanced);
}

std::vector<std::string> EngineCore::Update(const SchedulerOutput& sched, StepSamples& samples,
                                            std::vector<EngineOutput>& outputs) {
  const std::vector<RequestUpdate> updates = scheduler_->UpdateFromOutput(sched, samples.tokens);
  // Updates of requests that sampled complete their outputs; the rest (prefill chunks) report
  // nothing this step.
  std::unordered_map<std::string_view, size_t> sampled_index;
  for (size_t k = 0; k < samples.outputs.size(); ++k)
    sampled_index.emplace(samples.outputs[k].request_id, k);
  std::vector<std::string> finished;
  for (const RequestUpdate& u : updates) {
    auto it = sampled_index.find(u.request_id);
    if (it == sampled_index.end()) continue;
    EngineOutput& o = samples.outputs[it->second];
    output_->FillStats(u.request_id, u.num_cached_tokens, u.num_preemptions, o);
    if (u.finished()) {
      output_->Finish(u.request_id, FinishReasonOf(u.status), o);
      finished.push_back(u.request_id);
    }
  }
  for (EngineOutput& o : samples.outputs) outputs.push_back(std::move(o));
  return finished;
}

Status EngineCore::Speculate(const SchedulerOutput& sched, const SampledTokensMap& sampled,
                             const std::vector<std::string>& finished) {
  // The decoder reaches each still-running request's state through refs[i] (sched.scheduled[i]).
  std::vector<SpecRequestRef> refs(sched.scheduled.size());
  for (size_t i = 0; i < sched.scheduled.size(); ++i) {
    const std::string& id = sched.scheduled[i].request_id;
    if (!output_->Contains(id)) continue;  // finished this step
    RequestState& st = output_->Get(id);
    refs[i] = {&st.params, &st.rng, st.num_prompt_tokens, &st.spec};
  }
  RETURN_IF_ERROR(spec_->ProposeDrafts(sched, refs, sampled, *scheduler_));
  for (const std::string& id : finished) spec_->RemoveRequest(id);
  return Status::Ok();
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
  s.num_speculative_tokens = spec_ ? spec_->config().num_speculative_tokens : 0;
  if (spec_) s.spec_decode = spec_->stats();
  s.grammar_masks = grammar_masks_.load(std::memory_order_relaxed);
  s.grammar_mask_seconds =
      static_cast<double>(grammar_mask_ns_.load(std::memory_order_relaxed)) * 1e-9;
  if (grammar_) {
    const GrammarCompiler::Stats g = grammar_->stats();
    s.grammar_cache_hits = g.hits;
    s.grammar_cache_misses = g.misses;
    s.grammar_compile_seconds = g.compile_seconds;
  }
  s.tensor_parallel_size = config_.tensor_parallel_size;
  s.tp_forward_steps = tp_forward_steps_;
  s.tp_forward_seconds = tp_forward_seconds_;
  s.tp_comm_seconds = tp_comm_seconds_;
  s.tp_all_reduce_seconds = tp_all_reduce_seconds_;
  s.tp_all_reduces = tp_all_reduces_;
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
