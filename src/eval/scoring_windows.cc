#include "eval/scoring_windows.h"

#include <algorithm>

#include "pagellm/check.h"

namespace pagellm {

std::vector<ScoringWindow> PlanScoringWindows(int32_t doc, int32_t num_tokens, int32_t max_length,
                                              int32_t stride) {
  CHECK(max_length >= 2);
  CHECK(stride >= 1 && stride <= max_length);
  std::vector<ScoringWindow> out;
  int32_t prev_end = 0;
  for (int32_t begin = 0; begin < num_tokens; begin += stride) {
    const int32_t end = std::min(begin + max_length, num_tokens);
    ScoringWindow w{doc, begin, end, std::max(prev_end, begin + 1)};
    if (w.num_targets() > 0) out.push_back(w);
    prev_end = end;
    if (end == num_tokens) break;
  }
  return out;
}

std::vector<ScoringBatch> PackScoringBatches(const std::vector<ScoringWindow>& windows,
                                             int64_t max_tokens) {
  CHECK(max_tokens >= 1);
  std::vector<ScoringBatch> out;
  ScoringBatch cur;
  for (int32_t i = 0; i < static_cast<int32_t>(windows.size()); ++i) {
    const int64_t len = windows[i].length();
    if (cur.count > 0 && cur.num_tokens + len > max_tokens) {
      out.push_back(cur);
      cur = ScoringBatch{};
    }
    if (cur.count == 0) cur.first = i;
    ++cur.count;
    cur.num_tokens += len;
  }
  if (cur.count > 0) out.push_back(cur);
  return out;
}

}  // namespace pagellm
