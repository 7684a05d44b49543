#include "spec/speculative_decoder.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"
#include "pagellm/check.h"
#include "spdlog/spdlog.h"
#include "spec/speculative_config_parser.h"

namespace pagellm {

StatusOr<std::unique_ptr<SpeculativeDecoder>> SpeculativeDecoder::Create(
    const SpeculativeConfig& config, const LoadedModel& target, const Tokenizer& tokenizer,
    int32_t max_model_len, int32_t max_num_seqs) {
  CHECK(config.enabled());
  std::unique_ptr<SpeculativeDecoder> d(new SpeculativeDecoder());
  d->config_ = config;
  d->max_model_len_ = max_model_len;
  d->max_num_seqs_ = max_num_seqs;
  if (config.method == SpeculativeMethod::kDraftModel) {
    ASSIGN_OR_RETURN(d->draft_, DraftModelProposer::Load(config, target, tokenizer, max_model_len));
  } else {
    CHECK(config.method == SpeculativeMethod::kNgram);
    // The rule only decides what is drafted (src/spec/ngram_proposer.h); the output does not
    // depend on it.
    d->ngram_ = std::make_unique<NgramProposer>(
        config.prompt_lookup_min, config.prompt_lookup_max, config.num_speculative_tokens,
        config.ngram_rule == "earliest" ? NgramRule::kEarliest : NgramRule::kVote);
  }
  DraftPolicyConfig pc;
  pc.adaptive = config.draft_policy != "fixed";
  pc.free_tokens = config.draft_free_tokens;
  d->policy_ = AdaptiveDraftPolicy(pc);
  spdlog::info("speculative decoding: method {}, {} tokens per step ({}){}",
               SpeculativeMethodName(config.method), config.num_speculative_tokens,
               pc.adaptive ? fmt::format("adaptive: per-request acceptance, no drafts in "
                                         "steps of >= {} tokens",
                                         pc.free_tokens)
                           : std::string("fixed"),
               d->draft_ ? fmt::format(", draft max_model_len {}", d->draft_->max_model_len())
                         : fmt::format(", n-gram sizes {}..{}", config.prompt_lookup_min,
                                       config.prompt_lookup_max));
  return d;
}

int32_t SpeculativeDecoder::num_lookahead_tokens() const {
  return draft_ ? config_.num_speculative_tokens : 0;
}

Status SpeculativeDecoder::Allocate(int32_t block_size, int32_t num_blocks, int32_t num_swap_blocks,
                                    ThreadPool* pool, std::span<const int32_t> eos_ids) {
  scratch_.resize(pool->num_threads());
  if (!draft_) return Status::Ok();
  return draft_->AllocateKv(block_size, num_blocks, num_swap_blocks, pool, eos_ids);
}

void SpeculativeDecoder::PoisonKvCache() {
  if (draft_) draft_->PoisonKvCache();
}

void SpeculativeDecoder::OnScheduled(const SchedulerOutput& sched) {
  if (!draft_) return;
  // The draft's cache follows the target's block tables, so it moves with them.
  for (const BlockCopy& c : sched.swap_out) draft_->SwapOutBlock(c.src, c.dst);
  for (const BlockCopy& c : sched.swap_in) draft_->SwapInBlock(c.src, c.dst);
  for (const ScheduledRequest& r : sched.scheduled)
    if (r.is_new) draft_->ResetRequest(r.request_id, r.num_computed_tokens);
}

RejectionResult SpeculativeDecoder::Verify(const ScheduledRequest& sched, const Request& req,
                                           const SpecRequestRef& ref,
                                           std::span<const int32_t> eos_ids,
                                           const ForwardOutput& logits, int32_t first_row,
                                           int32_t vocab, Sampler& sampler, int thread,
                                           std::span<const uint64_t> allowed_tokens) {
  VerifyScratch& scratch = scratch_[thread];
  const SamplingParams& params = *ref.params;
  const int32_t d = sched.num_spec_tokens;
  const std::span<const int32_t> drafts =
      std::span<const int32_t>(sched.token_ids).last(static_cast<size_t>(d));
  // Target distribution at each verified position; row j sees drafts[0..j) as outputs (for
  // penalties and min_tokens), as if the target had generated them.
  std::vector<int32_t>& outputs = scratch.outputs;
  outputs.assign(req.output_token_ids().begin(), req.output_token_ids().end());
  const size_t num_outputs = outputs.size();
  outputs.insert(outputs.end(), drafts.begin(), drafts.end());
  const size_t mask_words = (static_cast<size_t>(vocab) + 63) / 64;
  auto row_mask = [&](int32_t j) -> std::span<const uint64_t> {
    if (allowed_tokens.empty()) return {};
    return allowed_tokens.subspan(static_cast<size_t>(j) * mask_words, mask_words);
  };
  RejectionResult rr;
  if (Sampler::IsGreedy(params)) {
    // Only the target's greedy token per position matters: no probability rows.
    std::vector<int32_t>& targets = scratch.targets;
    targets.resize(static_cast<size_t>(d) + 1);
    for (int32_t j = 0; j <= d; ++j) {
      const SamplingInput in{params, req.prompt_token_ids(),
                             std::span<const int32_t>(outputs).first(num_outputs + j), eos_ids,
                             row_mask(j)};
      targets[j] =
          sampler.GreedyToken(std::span<const float>(logits.row(first_row + j), vocab), in);
    }
    rr = VerifyGreedy(drafts, targets);
  } else {
    std::vector<float>& probs = scratch.probs;
    probs.resize(static_cast<size_t>(d + 1) * vocab);
    for (int32_t j = 0; j <= d; ++j) {
      const SamplingInput in{params, req.prompt_token_ids(),
                             std::span<const int32_t>(outputs).first(num_outputs + j), eos_ids,
                             row_mask(j)};
      sampler.ComputeProbs(std::span<const float>(logits.row(first_row + j), vocab), in,
                           std::span<float>(probs.data() + int64_t{j} * vocab, vocab));
    }
    const std::vector<float>& pending = ref.spec->draft_probs;
    std::span<const float> draft_probs;
    if (!pending.empty()) {
      CHECK_GE(pending.size(), static_cast<size_t>(d) * vocab);
      draft_probs = std::span<const float>(pending).first(static_cast<size_t>(d) * vocab);
    }
    rr = RejectionSample(drafts, draft_probs, probs, vocab, /*greedy=*/false, *ref.rng);
  }
  ref.spec->draft_probs.clear();
  return rr;
}

void SpeculativeDecoder::Observe(const std::string& request_id, int32_t num_drafts,
                                 int32_t num_accepted) {
  stats_.ObserveDraft(num_drafts, num_accepted);
  policy_.Observe(request_id, num_drafts, num_accepted);
}

int32_t SpeculativeDecoder::MaxDrafts(const Request& req) const {
  const int32_t num_tokens = req.num_tokens();
  int32_t d = config_.num_speculative_tokens;
  // Verification feeds positions num_tokens - 1 .. num_tokens - 1 + d, never max_model_len - 1.
  d = std::min(d, max_model_len_ - 1 - num_tokens);
  // d drafts emit at most d + 1 tokens; more than the request may still generate is waste.
  d = std::min(d, req.max_tokens() - req.num_output_tokens() - 1);
  if (draft_) {
    // The draft feeds positions num_tokens - 1 .. num_tokens + d - 2.
    d = std::min(d, draft_->max_model_len() - num_tokens + 1);
  }
  return std::max(d, 0);
}

Status SpeculativeDecoder::ProposeDrafts(const SchedulerOutput& sched,
                                         std::span<const SpecRequestRef> refs,
                                         const SampledTokensMap& sampled, Scheduler& scheduler) {
  CHECK_EQ(refs.size(), sched.scheduled.size());
  std::vector<DraftModelProposer::Input> inputs;
  std::vector<SpecRequestState*> input_states;        // [inputs] (null: catch-up only)
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
  for (size_t i = 0; i < sched.scheduled.size(); ++i) {
    const ScheduledRequest& r = sched.scheduled[i];
    const Request* req = scheduler.GetRequest(r.request_id);
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
      input_states.push_back(nullptr);
      continue;
    }
    const SpecRequestRef& ref = refs[i];
    ref.spec->draft_probs.clear();
    const int32_t max_drafts = r.samples ? MaxDrafts(*req) : 0;
    const bool seeded_random = !Sampler::IsGreedy(*ref.params) && ref.params->seed.has_value();
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
    in.block_table = scheduler.kv_cache_manager().BlockTable(r.request_id);
    in.params = ref.params;
    in.num_prompt_tokens = ref.num_prompt_tokens;
    in.rng = ref.rng;
    if (max_drafts > 0)
      cands.push_back(
          {&r.request_id, max_drafts, {}, static_cast<int64_t>(inputs.size()), seeded_random});
    inputs.push_back(in);
    input_states.push_back(ref.spec);
  }
  if (!cands.empty()) {
    // The next step's tokens without drafts: one per running request, and a prefill chunk
    // (compute-bound: no cheap room for drafts) when a waiting request can be admitted.
    int32_t base_tokens = scheduler.num_running();
    if (scheduler.num_waiting() > 0 && base_tokens < max_num_seqs_)
      base_tokens += static_cast<int32_t>(std::ceil(policy_.config().free_tokens));
    std::vector<double> alphas(cands.size());
    std::vector<int32_t> caps(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
      alphas[i] = policy_.Acceptance(*cands[i].request_id);
      // Fixed requests take their drafts first; the rest share what is left.
      caps[i] = cands[i].fixed ? 0 : cands[i].cap;
      if (cands[i].fixed) base_tokens += cands[i].cap;
    }
    std::vector<int32_t> alloc = policy_.Allocate(alphas, caps, base_tokens);
    for (size_t i = 0; i < cands.size(); ++i)
      if (cands[i].fixed) alloc[i] = cands[i].cap;
    for (size_t i = 0; i < cands.size(); ++i) {
      Candidate& c = cands[i];
      if (c.input >= 0) {
        inputs[c.input].max_drafts = alloc[i];
      } else if (alloc[i] > 0) {
        c.ngram.resize(alloc[i]);
        scheduler.SetSpecTokens(*c.request_id, std::move(c.ngram));
      }
    }
  }
  if (!draft_ || inputs.empty()) return Status::Ok();
  std::vector<DraftModelProposer::Proposal> proposals;
  RETURN_IF_ERROR(draft_->Propose(inputs, &proposals));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].max_drafts == 0 || proposals[i].tokens.empty()) continue;
    input_states[i]->draft_probs = std::move(proposals[i].probs);
    scheduler.SetSpecTokens(inputs[i].request_id, std::move(proposals[i].tokens));
  }
  return Status::Ok();
}

void SpeculativeDecoder::RemoveRequest(const std::string& request_id) {
  policy_.Remove(request_id);
  if (draft_) draft_->RemoveRequest(request_id);
}

}  // namespace pagellm
