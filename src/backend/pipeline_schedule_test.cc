#include "backend/pipeline_schedule.h"

#include <gtest/gtest.h>

namespace pagellm {
namespace {

ForwardBatch Batch(const std::vector<int32_t>& tokens_per_seq) {
  ForwardBatch b;
  for (int32_t n : tokens_per_seq) {
    SequenceChunk s;
    s.num_tokens = n;
    b.seqs.push_back(s);
    for (int32_t i = 0; i < n; ++i) b.token_ids.push_back(static_cast<int32_t>(b.token_ids.size()));
  }
  return b;
}

std::vector<std::pair<int, int>> Seqs(const std::vector<MicroBatch>& m) {
  std::vector<std::pair<int, int>> out;
  for (const MicroBatch& x : m) out.emplace_back(x.seq_begin, x.seq_end);
  return out;
}

TEST(PipelineSchedule, MicroBatchesBalanceTokensOverWholeSequences) {
  using P = std::vector<std::pair<int, int>>;
  // Eight decode tokens on 2 stages: two micro-batches of 4.
  EXPECT_EQ(Seqs(PlanMicroBatches(Batch({1, 1, 1, 1, 1, 1, 1, 1}), 2, 1)), (P{{0, 4}, {4, 8}}));
  // A long prompt and short ones: the cut falls where the first share is reached.
  EXPECT_EQ(Seqs(PlanMicroBatches(Batch({30, 1, 1, 1}), 2, 1)), (P{{0, 1}, {1, 4}}));
  EXPECT_EQ(Seqs(PlanMicroBatches(Batch({1, 1, 1, 30}), 2, 1)), (P{{0, 3}, {3, 4}}));
  // Fewer sequences than stages: one micro-batch each.
  EXPECT_EQ(Seqs(PlanMicroBatches(Batch({5, 7}), 4, 1)), (P{{0, 1}, {1, 2}}));
  EXPECT_EQ(Seqs(PlanMicroBatches(Batch({9}), 2, 1)), (P{{0, 1}}));
  // Too few tokens for the threshold: not split (or split less).
  EXPECT_EQ(Seqs(PlanMicroBatches(Batch({1, 1, 1, 1}), 2, 16)), (P{{0, 4}}));
  EXPECT_EQ(Seqs(PlanMicroBatches(Batch(std::vector<int32_t>(40, 1)), 4, 16)).size(), 2u);
  // Token ranges follow the sequences.
  const std::vector<MicroBatch> m = PlanMicroBatches(Batch({3, 2, 4, 1}), 2, 1);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].token_begin, 0);
  EXPECT_EQ(m[0].token_end, m[1].token_begin);
  EXPECT_EQ(m[1].token_end, 10);
  const ForwardBatch second = MicroBatchOf(Batch({3, 2, 4, 1}), m[1]);
  EXPECT_EQ(second.seqs.size(), static_cast<size_t>(m[1].seq_end - m[1].seq_begin));
  EXPECT_EQ(second.token_ids.front(), m[1].token_begin);
  EXPECT_TRUE(PlanMicroBatches(ForwardBatch(), 2, 1).empty());
}

TEST(PipelineSchedule, OutputsAppendAndTravel) {
  ForwardOutput a, b, whole;
  a.vocab_size = b.vocab_size = 2;
  a.hidden_size = b.hidden_size = 3;
  a.logits = {1, 2, 3, 4};  // two rows: a sequence with all logits
  a.row_offset = {0};
  a.hidden_offset = {-1};
  b.logits = {5, 6, 7, 8};
  b.row_offset = {0, 1};
  b.hidden = {1, 1, 1};
  b.hidden_offset = {-1, 0};
  AppendOutput(a, &whole);
  AppendOutput(b, &whole);
  EXPECT_EQ(whole.logits, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(whole.row_offset, (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(whole.hidden_offset, (std::vector<int32_t>{-1, -1, 0}));
  EXPECT_EQ(whole.hidden, (std::vector<float>{1, 1, 1}));

  const std::vector<uint8_t> bytes = EncodeOutput(whole);
  ForwardOutput back;
  ASSERT_TRUE(DecodeOutput(bytes, &back).ok());
  EXPECT_EQ(back.logits, whole.logits);
  EXPECT_EQ(back.row_offset, whole.row_offset);
  EXPECT_EQ(back.hidden, whole.hidden);
  EXPECT_EQ(back.hidden_offset, whole.hidden_offset);
  EXPECT_EQ(back.vocab_size, 2);
  EXPECT_EQ(back.hidden_size, 3);
  for (size_t n = 0; n < bytes.size(); ++n) {
    ForwardOutput cut;
    EXPECT_EQ(DecodeOutput(std::vector<uint8_t>(bytes.begin(), bytes.begin() + n), &cut).code(),
              StatusCode::kDataLoss)
        << n;
  }
}

}  // namespace
}  // namespace pagellm
