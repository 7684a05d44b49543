#include "spec/adaptive_draft_policy.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "pagellm/check.h"

namespace pagellm {

void AdaptiveDraftPolicy::Observe(const std::string& request_id, int32_t num_drafts,
                                  int32_t num_accepted) {
  if (num_drafts <= 0) return;
  CHECK(num_accepted >= 0 && num_accepted <= num_drafts);
  // Positions examined: every accepted one, plus the rejected one if any.
  const double trials = num_accepted < num_drafts ? num_accepted + 1 : num_drafts;
  Counts& c = requests_[request_id];
  c.accepted = config_.decay * c.accepted + num_accepted;
  c.trials = config_.decay * c.trials + trials;
  global_accepted_ += num_accepted;
  global_trials_ += trials;
}

double AdaptiveDraftPolicy::GlobalAcceptance() const {
  // Laplace's rule: 0.5 before any verification.
  return (global_accepted_ + 1.0) / (global_trials_ + 2.0);
}

double AdaptiveDraftPolicy::Acceptance(const std::string& request_id) const {
  const double prior = GlobalAcceptance();
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return prior;
  const Counts& c = it->second;
  return (c.accepted + config_.prior_weight * prior) / (c.trials + config_.prior_weight);
}

std::vector<int32_t> AdaptiveDraftPolicy::Allocate(std::span<const double> alphas,
                                                   std::span<const int32_t> caps,
                                                   int32_t base_tokens) const {
  CHECK_EQ(alphas.size(), caps.size());
  std::vector<int32_t> alloc(caps.size(), 0);
  if (!config_.adaptive) {
    for (size_t i = 0; i < caps.size(); ++i) alloc[i] = std::max(caps[i], 0);
    return alloc;
  }
  const double base = std::max(base_tokens, 1);
  auto cost = [&](double tokens) {
    return std::max(1.0 + config_.token_cost * (tokens - base), tokens / config_.free_tokens);
  };
  // Max-heap of (gain of the request's next draft, -index): ties go to the lower index.
  std::priority_queue<std::pair<double, int64_t>> heap;
  std::vector<double> next_gain(caps.size(), 0.0);
  for (size_t i = 0; i < caps.size(); ++i) {
    const double a = std::clamp(alphas[i], 0.0, 1.0);
    if (caps[i] <= 0 || !(a > 0.0)) continue;
    next_gain[i] = a;
    heap.emplace(a, -static_cast<int64_t>(i));
  }
  double emitted = base;  // expected tokens emitted: one per request plus accepted drafts
  double tokens = base;
  while (!heap.empty()) {
    const auto [gain, neg_i] = heap.top();
    heap.pop();
    // Take the draft iff (emitted + gain) / cost(tokens + 1) > emitted / cost(tokens).
    if ((emitted + gain) * cost(tokens) <= emitted * cost(tokens + 1)) break;
    const size_t i = static_cast<size_t>(-neg_i);
    emitted += gain;
    tokens += 1;
    if (++alloc[i] < caps[i]) {
      next_gain[i] *= std::clamp(alphas[i], 0.0, 1.0);
      heap.emplace(next_gain[i], neg_i);
    }
  }
  return alloc;
}

}  // namespace pagellm
