// N-gram proposer: exact proposals for hand-made sequences (longest match, earliest occurrence
// or vote, caps) and agreement with brute-force references on random sequences.
#include "spec/ngram_proposer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace pagellm {
namespace {

using Ids = std::vector<int32_t>;

TEST(NgramProposerTest, NoMatchGivesNothing) {
  const NgramProposer p(1, 3, 4);
  EXPECT_EQ(p.Propose(Ids{1, 2, 3, 4}), Ids{});
  EXPECT_EQ(p.Propose(Ids{}), Ids{});
  EXPECT_EQ(p.Propose(Ids{7}), Ids{});
}

TEST(NgramProposerTest, ProposesWhatFollowedTheMatch) {
  const NgramProposer p(1, 3, 2);
  // Last 2-gram {1, 2} occurred at [0, 2), followed by 3, 4.
  EXPECT_EQ(p.Propose(Ids{1, 2, 3, 4, 1, 2}), (Ids{3, 4}));
}

TEST(NgramProposerTest, LongestMatchWinsOverEarlierShorterOne) {
  const Ids tokens = {2, 3, 9, 1, 2, 3, 7, 1, 2, 3};
  // {1, 2, 3} occurs at [3, 6): the 3-gram beats the earlier 2-gram {2, 3} at [0, 2).
  EXPECT_EQ(NgramProposer(1, 3, 3).Propose(tokens), (Ids{7, 1, 2}));
  // With n capped at 2 both occurrences are 2-grams and the earliest wins.
  EXPECT_EQ(NgramProposer(1, 2, 3).Propose(tokens), (Ids{9, 1, 2}));
}

TEST(NgramProposerTest, EarliestOccurrenceWinsAsInVllm) {
  // {1, 2} occurs at [0, 2) (then 7) and at [3, 5) (then 8).
  EXPECT_EQ(NgramProposer(1, 2, 1).Propose(Ids{1, 2, 7, 1, 2, 8, 1, 2}), (Ids{7}));
}

TEST(NgramProposerTest, MinNFiltersShortMatches) {
  const Ids tokens = {4, 1, 2, 3, 9, 3};  // only the 1-gram {3} recurs
  EXPECT_EQ(NgramProposer(2, 3, 2).Propose(tokens), Ids{});
  EXPECT_EQ(NgramProposer(1, 3, 2).Propose(tokens), (Ids{9, 3}));
  EXPECT_EQ(NgramProposer(4, 5, 2).Propose(Ids{1, 1, 1}), Ids{});  // shorter than min_n
}

TEST(NgramProposerTest, ProposalStopsAtTheEndOfTheSequence) {
  // {1, 2} at [1, 3) is followed by only two tokens.
  EXPECT_EQ(NgramProposer(1, 2, 5).Propose(Ids{7, 1, 2, 1, 2}), (Ids{1, 2}));
}

TEST(NgramProposerTest, RunsOverlapTheirOwnSuffix) {
  const Ids run = {5, 5, 5, 5};
  EXPECT_EQ(NgramProposer(1, 3, 4).Propose(run), (Ids{5}));     // 3-gram at [0, 3)
  EXPECT_EQ(NgramProposer(1, 2, 4).Propose(run), (Ids{5, 5}));  // 2-gram at [0, 2)
  EXPECT_EQ(NgramProposer(1, 1, 4).Propose(run), (Ids{5, 5, 5}));
}

TEST(NgramProposerTest, VoteDraftsTheMostFrequentFollowerPastTheEnd) {
  const NgramRule vote = NgramRule::kVote;
  // "1 2" was followed by 7 once and by 8 twice: vote drafts 8 where vLLM's rule copies 7.
  const Ids tokens{1, 2, 7, 1, 2, 8, 1, 2, 8, 1, 2};
  EXPECT_EQ(NgramProposer(2, 2, 1).Propose(tokens), (Ids{7}));
  EXPECT_EQ(NgramProposer(2, 2, 1, vote).Propose(tokens), (Ids{8}));
  // Each drafted token re-matches: "2 8" -> 1, "8 1" -> 2, "1 2" -> 8, ...
  EXPECT_EQ(NgramProposer(2, 2, 5, vote).Propose(tokens), (Ids{8, 1, 2, 8, 1}));
  // Runs and cycles continue past the end of the sequence, up to k.
  EXPECT_EQ(NgramProposer(1, 3, 4, vote).Propose(Ids{5, 5, 5, 5}), (Ids{5, 5, 5, 5}));
  EXPECT_EQ(NgramProposer(2, 2, 5, vote).Propose(Ids{7, 1, 2, 1, 2}), (Ids{1, 2, 1, 2, 1}));
  // Ties go to the follower seen most recently: "3" was followed by 4, then by 6.
  EXPECT_EQ(NgramProposer(1, 1, 1, vote).Propose(Ids{3, 4, 3, 6, 3}), (Ids{6}));
  // The longest match decides which occurrences vote: "9 3" (then 4) beats the 1-gram "3"
  // (followed by 6 twice).
  EXPECT_EQ(NgramProposer(1, 2, 1, vote).Propose(Ids{9, 3, 4, 3, 6, 3, 6, 9, 3}), (Ids{4}));
  // Only the latest 64 occurrences vote: "1" was followed by 2 a hundred times, then by 3
  // seventy times.
  Ids long_seq;
  for (int i = 0; i < 100; ++i) long_seq.insert(long_seq.end(), {1, 2});
  for (int i = 0; i < 70; ++i) long_seq.insert(long_seq.end(), {1, 3});
  long_seq.push_back(1);
  EXPECT_EQ(NgramProposer(1, 1, 1, vote).Propose(long_seq), (Ids{3}));
  // No match, min_n and the caps behave as in vLLM's rule.
  EXPECT_EQ(NgramProposer(1, 3, 4, vote).Propose(Ids{1, 2, 3, 4}), Ids{});
  EXPECT_EQ(NgramProposer(2, 3, 2, vote).Propose(Ids{4, 1, 2, 3, 9, 3}), Ids{});
  EXPECT_EQ(NgramProposer(2, 2, 5, vote).Propose(tokens, 2), (Ids{8, 1}));
  EXPECT_EQ(NgramProposer(2, 2, 5, vote).Propose(tokens, 0), Ids{});
}

TEST(NgramProposerTest, MaxTokensCapsTheProposal) {
  const NgramProposer p(1, 2, 4);
  const Ids tokens = {1, 2, 3, 4, 5, 6, 1, 2};
  EXPECT_EQ(p.Propose(tokens), (Ids{3, 4, 5, 6}));
  EXPECT_EQ(p.Propose(tokens, 2), (Ids{3, 4}));
  EXPECT_EQ(p.Propose(tokens, 9), (Ids{3, 4, 5, 6}));  // never more than k
  EXPECT_EQ(p.Propose(tokens, 0), Ids{});
  EXPECT_EQ(p.Propose(tokens, -3), Ids{});
}

// Straightforward definition: for n from max_n down to min_n, the first start s whose n-gram
// equals the last n tokens and ends before the last token; propose what follows.
Ids Reference(const Ids& tokens, int min_n, int max_n, int k) {
  const int len = static_cast<int>(tokens.size());
  for (int n = max_n; n >= min_n; --n) {
    if (n > len - 1) continue;
    for (int s = 0; s + n <= len - 1; ++s) {
      bool match = true;
      for (int j = 0; j < n && match; ++j) match = tokens[s + j] == tokens[len - n + j];
      if (match) {
        const int end = s + n;
        return Ids(tokens.begin() + end, tokens.begin() + std::min(len, end + k));
      }
    }
  }
  return {};
}

// The vote rule by its definition: extend the sequence one token at a time; for n from max_n
// down to min_n, count the tokens that followed the latest 64 earlier occurrences of the last n
// tokens; the first n with any occurrence decides: most frequent, ties to the latest occurrence.
Ids VoteReference(const Ids& tokens, int min_n, int max_n, int k) {
  Ids seq = tokens;
  Ids out;
  while (static_cast<int>(out.size()) < k) {
    const int len = static_cast<int>(seq.size());
    bool drafted = false;
    for (int n = max_n; n >= min_n && !drafted; --n) {
      if (n > len - 1) continue;
      std::vector<int> count(16, 0), latest(16, -1);
      int votes = 0;
      for (int s = len - 1 - n; s >= 0 && votes < 64; --s) {
        bool match = true;
        for (int j = 0; j < n && match; ++j) match = seq[s + j] == seq[len - n + j];
        if (match) {
          ++count[seq[s + n]];
          latest[seq[s + n]] = std::max(latest[seq[s + n]], s + n);
          ++votes;
        }
      }
      int best = -1;
      for (int t = 0; t < 16; ++t) {
        if (count[t] == 0) continue;
        if (best < 0 || count[t] > count[best] ||
            (count[t] == count[best] && latest[t] > latest[best]))
          best = t;
      }
      if (best >= 0) {
        out.push_back(best);
        seq.push_back(best);
        drafted = true;
      }
    }
    if (!drafted) break;
  }
  return out;
}

TEST(NgramProposerTest, VoteMatchesBruteForceOnRandomSequences) {
  std::mt19937 rng(23);
  int nonempty = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int alphabet = 2 + trial % 5;
    // Up to 200 tokens over 2-6 symbols: long enough for the 64-occurrence cap to bind.
    const int len = static_cast<int>(rng() % (trial % 3 == 0 ? 200 : 40));
    Ids tokens(len);
    for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % alphabet);
    const int min_n = 1 + static_cast<int>(rng() % 3);
    const int max_n = min_n + static_cast<int>(rng() % 4);
    const int k = 1 + static_cast<int>(rng() % 8);
    const Ids want = VoteReference(tokens, min_n, max_n, k);
    ASSERT_EQ(NgramProposer(min_n, max_n, k, NgramRule::kVote).Propose(tokens), want)
        << "trial " << trial << " min_n " << min_n << " max_n " << max_n << " k " << k;
    nonempty += !want.empty();
  }
  EXPECT_GT(nonempty, 1000);
}

TEST(NgramProposerTest, MatchesBruteForceOnRandomSequences) {
  std::mt19937 rng(17);
  int nonempty = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int alphabet = 2 + trial % 4;
    const int len = static_cast<int>(rng() % 40);
    Ids tokens(len);
    for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % alphabet);
    const int min_n = 1 + static_cast<int>(rng() % 3);
    const int max_n = min_n + static_cast<int>(rng() % 4);
    const int k = 1 + static_cast<int>(rng() % 6);
    const Ids want = Reference(tokens, min_n, max_n, k);
    ASSERT_EQ(NgramProposer(min_n, max_n, k).Propose(tokens), want)
        << "trial " << trial << " min_n " << min_n << " max_n " << max_n << " k " << k;
    nonempty += !want.empty();
  }
  EXPECT_GT(nonempty, 1000);  // the comparison exercised real matches
}

}  // namespace
}  // namespace pagellm
