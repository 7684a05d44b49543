// SpecDecodeStats: counters, vLLM's derived rates, merging, intervals and the log line.
#include "spec/spec_decode_stats.h"

#include <gtest/gtest.h>

#include <vector>

namespace pagellm {
namespace {

TEST(SpecDecodeStatsTest, EmptyHasNeutralRates) {
  const SpecDecodeStats s;
  EXPECT_EQ(s.AcceptanceRate(), 0.0);
  EXPECT_EQ(s.MeanAcceptanceLength(), 1.0);
  EXPECT_TRUE(s.PerPositionAcceptanceRate().empty());
}

TEST(SpecDecodeStatsTest, AccumulatesDraftsAndPositions) {
  SpecDecodeStats s;
  s.ObserveDraft(3, 3);
  s.ObserveDraft(3, 1);
  s.ObserveDraft(2, 0);
  s.ObserveDraft(0, 0);  // no drafts this step: not counted
  EXPECT_EQ(s.num_drafts, 3);
  EXPECT_EQ(s.num_draft_tokens, 8);
  EXPECT_EQ(s.num_accepted_tokens, 4);
  EXPECT_EQ(s.accepted_per_pos, (std::vector<int64_t>{2, 1, 1}));
  EXPECT_DOUBLE_EQ(s.AcceptanceRate(), 0.5);
  EXPECT_DOUBLE_EQ(s.MeanAcceptanceLength(), 1.0 + 4.0 / 3.0);
  const std::vector<double> rates = s.PerPositionAcceptanceRate();
  ASSERT_EQ(rates.size(), 3u);
  EXPECT_DOUBLE_EQ(rates[0], 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(rates[2], 1.0 / 3.0);
}

TEST(SpecDecodeStatsTest, MergeAndSinceAreInverse) {
  SpecDecodeStats total, step;
  total.ObserveDraft(2, 1);
  const SpecDecodeStats before = total;
  step.ObserveDraft(4, 4);
  step.ObserveDraft(4, 2);
  total.Merge(step);
  EXPECT_EQ(total.num_drafts, 3);
  EXPECT_EQ(total.num_draft_tokens, 10);
  EXPECT_EQ(total.num_accepted_tokens, 7);
  EXPECT_EQ(total.accepted_per_pos, (std::vector<int64_t>{3, 2, 1, 1}));
  const SpecDecodeStats delta = total.Since(before);
  EXPECT_EQ(delta.num_drafts, step.num_drafts);
  EXPECT_EQ(delta.num_draft_tokens, step.num_draft_tokens);
  EXPECT_EQ(delta.num_accepted_tokens, step.num_accepted_tokens);
  EXPECT_EQ(delta.accepted_per_pos, step.accepted_per_pos);
  total.Reset();
  EXPECT_EQ(total.num_drafts, 0);
  EXPECT_TRUE(total.accepted_per_pos.empty());
}

TEST(SpecDecodeStatsTest, LogLineShowsRates) {
  SpecDecodeStats s;
  s.ObserveDraft(2, 2);
  s.ObserveDraft(2, 1);
  EXPECT_EQ(s.LogLine(2.0),
            "SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 1.50 "
            "tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: 3 tokens, Drafted: 4 tokens, "
            "Per-position acceptance rate: 1.000, 0.500, Avg Draft acceptance rate: 75.0%");
}

}  // namespace
}  // namespace pagellm
