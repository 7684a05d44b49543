// Document splitting, sliding-window planning and batch packing for perplexity.
#include "eval/scoring_windows.h"

#include <gtest/gtest.h>

#include <numeric>

#include "eval/documents.h"

namespace pagellm {
namespace {

TEST(SplitDocuments, SplitsStripsAndDropsEmptyPieces) {
  const std::string text =
      "  First story.\n<|endoftext|>\nSecond\tstory. \n<|endoftext|>\n \n<|endoftext|>Third";
  EXPECT_EQ(SplitDocuments(text),
            (std::vector<std::string>{"First story.", "Second\tstory.", "Third"}));
  EXPECT_EQ(SplitDocuments("no separator \n"), (std::vector<std::string>{"no separator"}));
  EXPECT_TRUE(SplitDocuments("<|endoftext|>\n<|endoftext|>").empty());
  EXPECT_TRUE(SplitDocuments("").empty());
  EXPECT_EQ(SplitDocuments("a|b||c", "|"), (std::vector<std::string>{"a", "b", "c"}));
}

// Every target 1..n-1 must be scored exactly once, each window must fit max_length, and a
// target's context (begin..target-1) must lie inside its window.
void CheckCoverage(int32_t n, int32_t max_length, int32_t stride) {
  const std::vector<ScoringWindow> w = PlanScoringWindows(7, n, max_length, stride);
  std::vector<int> scored(n, 0);
  for (const ScoringWindow& x : w) {
    EXPECT_EQ(x.doc, 7);
    EXPECT_LE(x.length(), max_length);
    EXPECT_GT(x.first_target, x.begin);
    EXPECT_GT(x.num_targets(), 0);
    for (int32_t t = x.first_target; t < x.end; ++t) ++scored[t];
  }
  int64_t unscored = 0;
  for (int32_t t = 1; t < n; ++t) {
    EXPECT_LE(scored[t], 1) << "n " << n << " target " << t;
    unscored += scored[t] == 0;
  }
  if (n >= 1) {
    EXPECT_EQ(scored[0], 0);
  }
  // Only with disjoint windows (stride == max_length) does a window's first token go unscored.
  if (stride < max_length) {
    EXPECT_EQ(unscored, 0) << "n " << n << " L " << max_length << " S " << stride;
  } else {
    EXPECT_EQ(unscored, n > max_length ? (n - 1) / max_length : 0);
  }
}

TEST(PlanScoringWindows, ShortDocumentIsOneWindow) {
  const auto w = PlanScoringWindows(0, 100, 512, 256);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].begin, 0);
  EXPECT_EQ(w[0].end, 100);
  EXPECT_EQ(w[0].first_target, 1);
  EXPECT_TRUE(PlanScoringWindows(0, 1, 512, 256).empty());  // BOS alone: nothing to score
  EXPECT_TRUE(PlanScoringWindows(0, 0, 512, 256).empty());
}

TEST(PlanScoringWindows, SlidingWindowMatchesHuggingFaceLoop) {
  // n = 10, max_length 4, stride 2: windows [0,4) [2,6) [4,8) [6,10), each scoring only new
  // tokens: 1..3, 4..5, 6..7, 8..9.
  const auto w = PlanScoringWindows(0, 10, 4, 2);
  ASSERT_EQ(w.size(), 4u);
  const int32_t want[4][3] = {{0, 4, 1}, {2, 6, 4}, {4, 8, 6}, {6, 10, 8}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(w[i].begin, want[i][0]);
    EXPECT_EQ(w[i].end, want[i][1]);
    EXPECT_EQ(w[i].first_target, want[i][2]);
  }
}

TEST(PlanScoringWindows, EveryTargetScoredOnce) {
  for (int32_t n : {0, 1, 2, 3, 7, 64, 65, 511, 512, 513, 1000, 1537})
    for (int32_t L : {2, 3, 16, 512})
      for (int32_t S : {1, L / 2 > 0 ? L / 2 : 1, L - 1 > 0 ? L - 1 : 1, L}) CheckCoverage(n, L, S);
}

TEST(PackScoringBatches, PacksInOrderUnderTheBudget) {
  std::vector<ScoringWindow> w;
  for (int32_t len : {100, 200, 300, 50, 600, 10, 10})
    w.push_back(ScoringWindow{static_cast<int32_t>(w.size()), 0, len, 1});
  const auto b = PackScoringBatches(w, 400);
  // [100 200] [300 50] [600 alone, over budget] [10 10]
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].first, 0);
  EXPECT_EQ(b[0].count, 2);
  EXPECT_EQ(b[0].num_tokens, 300);
  EXPECT_EQ(b[1].first, 2);
  EXPECT_EQ(b[1].count, 2);
  EXPECT_EQ(b[2].first, 4);
  EXPECT_EQ(b[2].count, 1);
  EXPECT_EQ(b[2].num_tokens, 600);
  EXPECT_EQ(b[3].first, 5);
  EXPECT_EQ(b[3].count, 2);
  int total = 0;
  for (const auto& x : b) total += x.count;
  EXPECT_EQ(total, 7);
  EXPECT_TRUE(PackScoringBatches({}, 10).empty());
}

}  // namespace
}  // namespace pagellm
