#include "spec/spec_decode_stats.h"

#include <algorithm>
#include <cstddef>

#include <fmt/format.h>

#include "pagellm/check.h"

namespace pagellm {

void SpecDecodeStats::ObserveDraft(int num_draft, int num_accepted) {
  CHECK_GE(num_accepted, 0);
  CHECK_LE(num_accepted, num_draft);
  if (num_draft <= 0) return;
  ++num_drafts;
  num_draft_tokens += num_draft;
  num_accepted_tokens += num_accepted;
  if (accepted_per_pos.size() < static_cast<size_t>(num_draft)) {
    accepted_per_pos.resize(num_draft, 0);
  }
  for (int i = 0; i < num_accepted; ++i) ++accepted_per_pos[i];
}

void SpecDecodeStats::Merge(const SpecDecodeStats& other) {
  num_drafts += other.num_drafts;
  num_draft_tokens += other.num_draft_tokens;
  num_accepted_tokens += other.num_accepted_tokens;
  if (accepted_per_pos.size() < other.accepted_per_pos.size()) {
    accepted_per_pos.resize(other.accepted_per_pos.size(), 0);
  }
  for (size_t i = 0; i < other.accepted_per_pos.size(); ++i) {
    accepted_per_pos[i] += other.accepted_per_pos[i];
  }
}

SpecDecodeStats SpecDecodeStats::Since(const SpecDecodeStats& earlier) const {
  CHECK_GE(num_drafts, earlier.num_drafts) << "`earlier` is not an earlier copy";
  CHECK_LE(earlier.accepted_per_pos.size(), accepted_per_pos.size());
  SpecDecodeStats delta = *this;
  delta.num_drafts -= earlier.num_drafts;
  delta.num_draft_tokens -= earlier.num_draft_tokens;
  delta.num_accepted_tokens -= earlier.num_accepted_tokens;
  for (size_t i = 0; i < earlier.accepted_per_pos.size(); ++i) {
    delta.accepted_per_pos[i] -= earlier.accepted_per_pos[i];
  }
  return delta;
}

double SpecDecodeStats::AcceptanceRate() const {
  if (num_draft_tokens == 0) return 0.0;
  return static_cast<double>(num_accepted_tokens) / static_cast<double>(num_draft_tokens);
}

double SpecDecodeStats::MeanAcceptanceLength() const {
  if (num_drafts == 0) return 1.0;
  return 1.0 + static_cast<double>(num_accepted_tokens) / static_cast<double>(num_drafts);
}

std::vector<double> SpecDecodeStats::PerPositionAcceptanceRate() const {
  std::vector<double> rates;
  if (num_drafts == 0) return rates;
  rates.reserve(accepted_per_pos.size());
  for (int64_t a : accepted_per_pos) {
    rates.push_back(static_cast<double>(a) / static_cast<double>(num_drafts));
  }
  return rates;
}

std::string SpecDecodeStats::LogLine(double interval_s) const {
  const double seconds = interval_s > 0 ? interval_s : 1.0;
  std::string per_pos;
  for (double r : PerPositionAcceptanceRate()) {
    if (!per_pos.empty()) per_pos += ", ";
    per_pos += fmt::format("{:.3f}", r);
  }
  return fmt::format(
      "SpecDecoding metrics: Mean acceptance length: {:.2f}, Accepted throughput: {:.2f} "
      "tokens/s, Drafted throughput: {:.2f} tokens/s, Accepted: {} tokens, Drafted: {} tokens, "
      "Per-position acceptance rate: {}, Avg Draft acceptance rate: {:.1f}%",
      MeanAcceptanceLength(), static_cast<double>(num_accepted_tokens) / seconds,
      static_cast<double>(num_draft_tokens) / seconds, num_accepted_tokens, num_draft_tokens,
      per_pos, 100.0 * AcceptanceRate());
}

}  // namespace pagellm
