#include "spec/adaptive_draft_policy.h"

#include <vector>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

using Ints = std::vector<int32_t>;

TEST(AdaptiveDraftPolicyTest, FixedModeGivesEveryRequestItsCap) {
  DraftPolicyConfig c;
  c.adaptive = false;
  const AdaptiveDraftPolicy p(c);
  const std::vector<double> alphas{0.0, 0.9, 0.5};
  EXPECT_EQ(p.Allocate(alphas, Ints{8, 3, 0}, 64), (Ints{8, 3, 0}));
}

TEST(AdaptiveDraftPolicyTest, BatchOneDraftsDeepWhenAcceptedAndShallowWhenNot) {
  const AdaptiveDraftPolicy p;  // free_tokens 9, token_cost 0.03
  // alpha 0.9: every draft up to k = 8 pays for its 3% (0.9^8 = 0.43 of a token).
  EXPECT_EQ(p.Allocate(std::vector<double>{0.9}, Ints{8}, 1), Ints{8});
  // alpha 0.1: the first draft (0.1 expected tokens) pays for 3%, the second (0.01) does not.
  EXPECT_EQ(p.Allocate(std::vector<double>{0.1}, Ints{8}, 1), Ints{1});
  // alpha 0.5: gains 0.5, 0.25, 0.125, 0.0625 > 3% of the expected output; 0.03 is not.
  EXPECT_EQ(p.Allocate(std::vector<double>{0.5}, Ints{8}, 1), Ints{4});
  // Nothing accepted ever: no drafting; the cap bounds it.
  EXPECT_EQ(p.Allocate(std::vector<double>{0.0}, Ints{8}, 1), Ints{0});
  EXPECT_EQ(p.Allocate(std::vector<double>{0.9}, Ints{3}, 1), Ints{3});
}

TEST(AdaptiveDraftPolicyTest, ComputeBoundBatchesDoNotDraft) {
  const AdaptiveDraftPolicy p;
  for (int batch : {9, 16, 64}) {
    const std::vector<double> alphas(batch, 0.95);
    const Ints caps(batch, 8);
    const Ints alloc = p.Allocate(alphas, caps, batch);
    EXPECT_EQ(alloc, Ints(batch, 0)) << "batch " << batch;
  }
}

TEST(AdaptiveDraftPolicyTest, SmallBatchesSpendTheCheapSlotsOnAcceptedRequests) {
  const AdaptiveDraftPolicy p;
  // Batch 4: 5 tokens below the knee; the request whose drafts are accepted gets them.
  const std::vector<double> alphas{0.05, 0.9, 0.05, 0.05};
  const Ints alloc = p.Allocate(alphas, Ints{8, 8, 8, 8}, 4);
  EXPECT_EQ(alloc[0], 0);
  EXPECT_EQ(alloc[2], 0);
  EXPECT_EQ(alloc[3], 0);
  EXPECT_GE(alloc[1], 4);
  int total = 0;
  for (int32_t a : alloc) total += a;
  // Past the knee each token costs 1/9 of a step: far fewer than 4 x 8 drafts.
  EXPECT_LE(4 + total, 12);
  // Equal requests: ties go to the lower index, the allocation is deterministic.
  EXPECT_EQ(p.Allocate(std::vector<double>{0.6, 0.6}, Ints{8, 8}, 2),
            p.Allocate(std::vector<double>{0.6, 0.6}, Ints{8, 8}, 2));
}

TEST(AdaptiveDraftPolicyTest, AcceptanceTracksRecentVerificationsAndShrinksToThePrior) {
  AdaptiveDraftPolicy p;
  EXPECT_DOUBLE_EQ(p.GlobalAcceptance(), 0.5);           // nothing observed
  EXPECT_DOUBLE_EQ(p.Acceptance("new"), 0.5);            // unknown request: the global rate
  for (int i = 0; i < 10; ++i) p.Observe("good", 8, 8);  // all accepted
  for (int i = 0; i < 10; ++i) p.Observe("bad", 8, 0);   // first draft rejected each time
  EXPECT_GT(p.Acceptance("good"), 0.9);
  EXPECT_LT(p.Acceptance("bad"), 0.4);  // shrunk toward the 0.88 global rate
  // Global: 80 accepted of 90 examined positions (Laplace-smoothed).
  EXPECT_DOUBLE_EQ(p.GlobalAcceptance(), 81.0 / 92.0);
  // A request that turns bad shrinks (decay 0.7 per verification)...
  const double before = p.Acceptance("good");
  for (int i = 0; i < 5; ++i) p.Observe("good", 8, 0);
  EXPECT_LT(p.Acceptance("good"), 0.7);
  EXPECT_LT(p.Acceptance("good"), before - 0.25);
  // ... and so does its allocation at batch 1 (from k = 8), to a probe for "bad".
  const Ints alloc = p.Allocate(std::vector<double>{p.Acceptance("good")}, Ints{8}, 1);
  EXPECT_GE(alloc[0], 1);
  EXPECT_LE(alloc[0], 7);
  const Ints probe = p.Allocate(std::vector<double>{p.Acceptance("bad")}, Ints{8}, 1);
  EXPECT_GE(probe[0], 1);
  EXPECT_LE(probe[0], 3);
  p.Remove("good");
  EXPECT_DOUBLE_EQ(p.Acceptance("good"), p.GlobalAcceptance());
  p.Observe("x", 0, 0);  // no drafts: no information
  EXPECT_DOUBLE_EQ(p.Acceptance("x"), p.GlobalAcceptance());
}

}  // namespace
}  // namespace pagellm
