#include "sched/scheduler.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "fmt/format.h"
#include "pagellm/check.h"

namespace pagellm {
namespace {

// Priority order: smaller (priority, arrival) is served first and preempted last.
bool ServedBefore(const Request* a, const Request* b) {
  return std::tie(a->priority, a->arrival_seq) < std::tie(b->priority, b->arrival_seq);
}

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager kv)
    : config_(config), kv_(std::move(kv)) {
  Status s = config_.Validate();
  CHECK(s.ok()) << s.ToString();
  CHECK_EQ(config_.max_model_len, kv_.max_model_len());
}

Status Scheduler::AddRequest(Request request) {
  if (requests_.contains(request.id())) {
    return InvalidArgumentError(fmt::format("request id '{}' is already in use", request.id()));
  }
  if (request.num_prompt_tokens() == 0) {
    return InvalidArgumentError(fmt::format("request '{}' has an empty prompt", request.id()));
  }
  if (request.num_prompt_tokens() >= config_.max_model_len) {
    // The last position of a sequence is never fed (its output would exceed max_model_len), so
    // such a prompt could never be completed.
    return InvalidArgumentError(fmt::format(
        "request '{}': prompt of {} tokens leaves no room for output within max_model_len {}",
        request.id(), request.num_prompt_tokens(), config_.max_model_len));
  }
  if (request.max_tokens() < 1) {
    return InvalidArgumentError(fmt::format("request '{}': max_tokens must be >= 1, got {}",
                                            request.id(), request.max_tokens()));
  }
  // The longest sequence this request can reach must fit the cache alone, or it would preempt
  // everything and still never finish.
  const int64_t longest = std::min<int64_t>(
      int64_t{request.num_prompt_tokens()} + request.max_tokens() + config_.num_lookahead_tokens,
      config_.max_model_len);
  // Window groups hold the window plus one step's tokens at most (a prefill chunk, or the
  // recompute of a preempted request).
  const int64_t blocks = kv_.NumPoolBlocksForRequest(
      static_cast<int32_t>(longest),
      static_cast<int32_t>(std::min<int64_t>(config_.max_num_batched_tokens, longest)));
  if (blocks > kv_.block_pool().num_usable_blocks()) {
    return InvalidArgumentError(
        fmt::format("request '{}' may need {} KV blocks but the cache has only {}", request.id(),
                    blocks, kv_.block_pool().num_usable_blocks()));
  }
  auto owned = std::make_unique<Request>(std::move(request));
  Request* req = owned.get();
  req->arrival_seq = next_arrival_seq_++;
  req->status = RequestStatus::kWaiting;
  req->num_computed_tokens = 0;
  kv_.UpdateBlockHashes(*req);
  requests_.emplace(req->id(), std::move(owned));
  PushWaitingBack(req);
  return Status::Ok();
}

int32_t Scheduler::CapByThresholdAndBudget(int32_t num_new_tokens, int32_t budget) const {
  if (config_.long_prefill_token_threshold > 0) {
    num_new_tokens = std::min(num_new_tokens, config_.long_prefill_token_threshold);
  }
  return std::min(num_new_tokens, budget);
}

bool Scheduler::AdmitPrefill(const Request& req) {
  if (req.num_computed_tokens >= req.num_prompt_tokens()) return true;  // decoding
  if (config_.max_num_partial_prefills <= 0) return true;
  const bool is_long = config_.long_prefill_token_threshold > 0 &&
                       req.num_prompt_tokens() > config_.long_prefill_token_threshold;
  if (step_prefills_ >= config_.max_num_partial_prefills) return false;
  if (is_long && config_.max_long_partial_prefills > 0 &&
      step_long_prefills_ >= config_.max_long_partial_prefills)
    return false;
  ++step_prefills_;
  if (is_long) ++step_long_prefills_;
  return true;
}

Request* Scheduler::PickVictim() const {
  CHECK(!running_.empty());
  if (config_.policy == SchedulingPolicy::kFcfs) return running_.back();
  return *std::max_element(running_.begin(), running_.end(), ServedBefore);
}

void Scheduler::PushWaitingFront(Request* req) {
  if (config_.policy == SchedulingPolicy::kFcfs) {
    waiting_.push_front(req);
  } else {
    waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), req, ServedBefore), req);
  }
}

void Scheduler::PushWaitingBack(Request* req) {
  if (config_.policy == SchedulingPolicy::kFcfs) {
    waiting_.push_back(req);
  } else {
    waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), req, ServedBefore), req);
  }
}

void Scheduler::Preempt(Request& victim, SchedulerOutput& out) {
  victim.spec_token_ids.clear();
  bool swapped = false;
  if (config_.preemption_mode == PreemptionMode::kSwap && kv_.swap_enabled()) {
    if (std::optional<std::vector<BlockCopy>> copies = kv_.SwapOut(victim)) {
      out.swap_out.insert(out.swap_out.end(), copies->begin(), copies->end());
      victim.status = RequestStatus::kSwapped;
      ++num_swapped_;
      swapped = true;
    }
  }
  if (!swapped) {
    // Recompute: the blocks go back to the pool but keep their hashes, so the request usually
    // re-hits its own prefix when it resumes.
    kv_.Free(victim);
    victim.num_computed_tokens = 0;
    victim.status = RequestStatus::kPreempted;
  }
  ++victim.num_preemptions;
  ++num_preemptions_;
  out.preempted_request_ids.push_back(victim.id());
  PushWaitingFront(&victim);
}

bool Scheduler::ScheduleRunning(int32_t& budget, std::vector<Planned>& planned,
                                SchedulerOutput& out) {
  bool preempted = false;
  size_t i = 0;
  while (i < running_.size() && budget > 0) {
    Request* req = running_[i];
    int32_t n =
        CapByThresholdAndBudget(req->num_tokens_with_spec() - req->num_computed_tokens, budget);
    // Never feed position max_model_len - 1 or beyond (drafts could otherwise run past it).
    n = std::min(n, config_.max_model_len - 1 - req->num_computed_tokens);
    if (n <= 0 || !AdmitPrefill(*req)) {
      ++i;
      continue;
    }
    bool can_schedule = true;
    while (!kv_.AllocateSlots(*req, n, 0, {}, config_.num_lookahead_tokens)) {
      Request* victim = PickVictim();
      const auto pos = std::find(running_.begin(), running_.end(), victim);
      if (static_cast<size_t>(pos - running_.begin()) < i) --i;
      running_.erase(pos);
      // A victim already planned this step gives its tokens back to the budget.
      auto p = std::find_if(planned.begin(), planned.end(),
                            [&](const Planned& e) { return e.req == victim; });
      if (p != planned.end()) {
        budget += p->num_tokens;
        planned.erase(p);
      }
      Preempt(*victim, out);
      preempted = true;
      if (victim == req) {
        can_schedule = false;
        break;
      }
    }
    if (!can_schedule) break;
    const int32_t num_spec = std::max(0, req->num_computed_tokens + n - req->num_tokens());
    planned.push_back({req, n, num_spec, false});
    budget -= n;
    ++i;
  }
  return preempted;
}

void Scheduler::ScheduleWaiting(int32_t& budget, std::vector<Planned>& planned,
                                SchedulerOutput& out) {
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Request* req = waiting_.front();
    if (!AdmitPrefill(*req)) break;
    const bool swapped = req->status == RequestStatus::kSwapped;
    ComputedBlocks hit;
    if (!swapped) hit = kv_.GetComputedBlocks(*req);
    // num_tokens, not num_tokens_with_spec: a resumed request recomputes prompt and outputs.
    int32_t n = req->num_tokens() - req->num_computed_tokens - hit.num_tokens;
    if (config_.long_prefill_token_threshold > 0) {
      n = std::min(n, config_.long_prefill_token_threshold);
    }
    if (!config_.enable_chunked_prefill && n > budget) break;
    n = std::min(n, budget);
    CHECK_GT(n, 0);
    if (swapped) {
      std::optional<std::vector<BlockCopy>> copies =
          kv_.SwapIn(*req, n, config_.num_lookahead_tokens);
      if (!copies) break;
      out.swap_in.insert(out.swap_in.end(), copies->begin(), copies->end());
      --num_swapped_;
    } else {
      // Waiting requests never preempt: when there is no room, admission stops here.
      if (!kv_.AllocateSlots(*req, n, hit, config_.num_lookahead_tokens)) {
        break;
      }
      req->num_computed_tokens += hit.num_tokens;
      if (req->num_cached_tokens < 0) req->num_cached_tokens = hit.num_tokens;
    }
    waiting_.pop_front();
    req->status = RequestStatus::kRunning;
    running_.push_back(req);
    planned.push_back({req, n, 0, true});
    budget -= n;
  }
}

SchedulerOutput Scheduler::Schedule() {
  CHECK(!step_in_flight_) << "Schedule() called before UpdateFromOutput() of the previous step";
  SchedulerOutput out;
  out.finished_request_ids = std::move(finished_ids_);
  finished_ids_.clear();

  int32_t budget = config_.max_num_batched_tokens;
  std::vector<Planned> planned;
  step_prefills_ = 0;
  step_long_prefills_ = 0;
  // Admitting new work in a step that had to preempt would only thrash the cache.
  if (!ScheduleRunning(budget, planned, out)) ScheduleWaiting(budget, planned, out);

  for (const Planned& p : planned) {
    out.scheduled.push_back(MakeScheduledRequest(p));
    out.total_num_scheduled_tokens += p.num_tokens;
    // Drafts are consumed by the step that verifies them.
    if (p.num_spec_tokens > 0) p.req->spec_token_ids.clear();
  }
  step_in_flight_ = out.has_work();
  return out;
}

ScheduledRequest Scheduler::MakeScheduledRequest(const Planned& p) const {
  const Request& req = *p.req;
  ScheduledRequest s;
  s.request_id = req.id();
  s.num_computed_tokens = req.num_computed_tokens;
  s.num_scheduled_tokens = p.num_tokens;
  s.num_spec_tokens = p.num_spec_tokens;
  const int32_t num_known = p.num_tokens - p.num_spec_tokens;
  std::span<const int32_t> known = req.all_token_ids().subspan(req.num_computed_tokens, num_known);
  s.token_ids.assign(known.begin(), known.end());
  s.token_ids.insert(s.token_ids.end(), req.spec_token_ids.begin(),
                     req.spec_token_ids.begin() + p.num_spec_tokens);
  std::span<const int32_t> table = kv_.BlockTable(req.id());
  s.block_table.assign(table.begin(), table.end());
  if (kv_.num_groups() > 1) {
    std::span<const std::vector<int32_t>> tables = kv_.BlockTables(req.id());
    s.group_block_tables.assign(tables.begin(), tables.end());
  }
  s.is_new = p.is_new;
  s.samples = req.num_computed_tokens + p.num_tokens >= req.num_tokens();
  return s;
}

std::vector<RequestUpdate> Scheduler::UpdateFromOutput(const SchedulerOutput& output,
                                                       const SampledTokensMap& sampled) {
  step_in_flight_ = false;
  std::vector<RequestUpdate> updates;
  for (const ScheduledRequest& s : output.scheduled) {
    auto found = requests_.find(s.request_id);
    // Finished (e.g. aborted) since the step was planned.
    if (found == requests_.end() || found->second->status != RequestStatus::kRunning) continue;
    Request& req = *found->second;
    CHECK_EQ(req.num_computed_tokens, s.num_computed_tokens) << "stale output for " << req.id();
    req.num_computed_tokens += s.num_scheduled_tokens;
    auto it = sampled.find(s.request_id);
    if (!s.samples) {
      CHECK(it == sampled.end() || it->second.token_ids.empty())
          << "tokens sampled for " << req.id() << " in the middle of its prompt";
      continue;
    }
    CHECK(it != sampled.end() && !it->second.token_ids.empty())
        << "no sampled token for " << req.id();
    const std::vector<int32_t>& tokens = it->second.token_ids;
    const int32_t num_rejected = s.num_spec_tokens + 1 - static_cast<int32_t>(tokens.size());
    CHECK_GE(num_rejected, 0) << "more tokens than drafts + 1 for " << req.id();
    // KV of rejected drafts stays in its slots and is overwritten by later tokens; those slots
    // were never cached (only verified tokens are), so no block needs to change.
    req.num_computed_tokens -= num_rejected;
    req.spec_token_ids.clear();

    RequestUpdate u;
    u.request_id = req.id();
    for (size_t k = 0; k < tokens.size(); ++k) {
      req.AppendOutputToken(tokens[k]);
      u.new_token_ids.push_back(tokens[k]);
      // Stop conditions first, then length, as vLLM's check_stop.
      if (k + 1 == tokens.size() && it->second.stop) {
        u.status = RequestStatus::kFinishedStopped;
        break;
      }
      if (req.num_tokens() >= config_.max_model_len ||
          req.num_output_tokens() >= req.max_tokens()) {
        u.status = RequestStatus::kFinishedLengthCapped;
        break;
      }
    }
    kv_.UpdateBlockHashes(req);
    u.num_cached_tokens = std::max(0, req.num_cached_tokens);
    u.num_preemptions = req.num_preemptions;
    if (u.finished()) Finish(req, u.status);  // destroys req
    updates.push_back(std::move(u));
  }
  return updates;
}

void Scheduler::Finish(Request& req, RequestStatus status) {
  CHECK(IsFinished(status));
  const std::string id = req.id();  // req dies with its map entry below
  if (auto r = std::find(running_.begin(), running_.end(), &req); r != running_.end()) {
    running_.erase(r);
  } else if (auto w = std::find(waiting_.begin(), waiting_.end(), &req); w != waiting_.end()) {
    waiting_.erase(w);
    if (req.status == RequestStatus::kSwapped) --num_swapped_;
  }
  kv_.Free(req);
  req.status = status;
  finished_ids_.push_back(id);
  requests_.erase(id);
}

int Scheduler::FinishRequests(std::span<const std::string> request_ids, RequestStatus status) {
  int n = 0;
  for (const std::string& id : request_ids) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    Finish(*it->second, status);
    ++n;
  }
  return n;
}

bool Scheduler::Abort(const std::string& request_id) {
  return FinishRequests(std::span<const std::string>(&request_id, 1),
                        RequestStatus::kFinishedAborted) == 1;
}

void Scheduler::SetSpecTokens(const std::string& request_id, std::vector<int32_t> spec_token_ids) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  it->second->spec_token_ids = std::move(spec_token_ids);
}

const Request* Scheduler::GetRequest(const std::string& request_id) const {
  auto it = requests_.find(request_id);
  return it == requests_.end() ? nullptr : it->second.get();
}

std::vector<std::string> Scheduler::RunningIds() const {
  std::vector<std::string> ids;
  for (const Request* r : running_) ids.push_back(r->id());
  return ids;
}

std::vector<std::string> Scheduler::WaitingIds() const {
  std::vector<std::string> ids;
  for (const Request* r : waiting_) ids.push_back(r->id());
  return ids;
}

}  // namespace pagellm
