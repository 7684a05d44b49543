#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sched/scheduler_test_util.h"

namespace pagellm {
namespace {

using Ids = std::vector<int32_t>;
using Strings = std::vector<std::string>;
using Copies = std::vector<BlockCopy>;
using testing::Find;
using testing::Iota;
using testing::Plan;
using testing::PlanOf;

std::vector<int32_t> AllTokens(const Request& r) {
  return std::vector<int32_t>(r.all_token_ids().begin(), r.all_token_ids().end());
}

SchedulerConfig Config(int32_t budget, int32_t max_model_len = 64) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_model_len = max_model_len;
  return c;
}

class SchedulerTest : public testing::SchedulerFixture {};

TEST_F(SchedulerTest, BudgetIsSharedRunningFirstThenWaiting) {
  Init(Config(10));
  Add("a", Iota(4, 100));
  Add("b", Iota(4, 200));
  Add("c", Iota(4, 300));
  SchedulerOutput s1 = Step();
  EXPECT_EQ(PlanOf(s1), (Plan{{"a", 4}, {"b", 4}, {"c", 2}}));
  EXPECT_EQ(s1.total_num_scheduled_tokens, 10);
  EXPECT_TRUE(Find(s1, "a").samples);
  EXPECT_FALSE(Find(s1, "c").samples);  // mid-prompt: no sampling
  EXPECT_TRUE(Find(s1, "c").is_new);
  EXPECT_EQ(Find(s1, "a").block_table, (Ids{1}));
  EXPECT_EQ(Find(s1, "b").block_table, (Ids{2}));
  EXPECT_EQ(Find(s1, "c").block_table, (Ids{3}));

  SchedulerOutput s2 = Step();
  EXPECT_EQ(PlanOf(s2), (Plan{{"a", 1}, {"b", 1}, {"c", 2}}));
  EXPECT_FALSE(Find(s2, "a").is_new);
  EXPECT_EQ(Find(s2, "a").num_computed_tokens, 4);
  EXPECT_EQ(Find(s2, "a").token_ids, (Ids{1004}));  // the token sampled in step 1
  EXPECT_EQ(Find(s2, "a").block_table, (Ids{1, 4}));
  EXPECT_EQ(Find(s2, "c").num_computed_tokens, 2);
  EXPECT_EQ(Find(s2, "c").token_ids, (Ids{302, 303}));

  Add("d", Iota(8, 400));
  SchedulerOutput s3 = Step();
  EXPECT_EQ(PlanOf(s3), (Plan{{"a", 1}, {"b", 1}, {"c", 1}, {"d", 7}}));
  EXPECT_EQ(sched_->num_running(), 4);
  EXPECT_EQ(sched_->num_waiting(), 0);
}

TEST_F(SchedulerTest, ChunkedPrefillChunksAreBudgetSized) {
  Init(Config(8));
  const std::vector<int32_t> prompt = Iota(25);
  Add("a", prompt);
  std::vector<int32_t> starts, sizes;
  for (int step = 0; step < 5; ++step) {
    SchedulerOutput out = Step();
    const ScheduledRequest& s = Find(out, "a");
    starts.push_back(s.num_computed_tokens);
    sizes.push_back(s.num_scheduled_tokens);
    EXPECT_EQ(s.samples, step >= 3) << step;
    if (step < 4) {
      const auto first = prompt.begin() + s.num_computed_tokens;
      EXPECT_EQ(s.token_ids, Ids(first, first + s.num_scheduled_tokens));
    }
  }
  EXPECT_EQ(starts, (Ids{0, 8, 16, 24, 25}));
  EXPECT_EQ(sizes, (Ids{8, 8, 8, 1, 1}));
  EXPECT_EQ(Req("a").num_output_tokens(), 2);
}

TEST_F(SchedulerTest, WithoutChunkedPrefillAPromptWaitsForAWholeBudget) {
  SchedulerConfig c = Config(32, 32);
  c.enable_chunked_prefill = false;
  Init(c);
  Add("a", Iota(20, 100));
  Add("b", Iota(20, 200));
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 20}}));
  EXPECT_EQ(sched_->WaitingIds(), (Strings{"b"}));
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 1}, {"b", 20}}));
}

TEST_F(SchedulerTest, WithChunkedPrefillTheRemainderIsChunked) {
  Init(Config(32, 32));
  Add("a", Iota(20, 100));
  Add("b", Iota(20, 200));
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 20}, {"b", 12}}));
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 1}, {"b", 8}}));
}

TEST_F(SchedulerTest, LongPrefillThresholdCapsEveryRequest) {
  SchedulerConfig c = Config(100);
  c.long_prefill_token_threshold = 5;
  Init(c);
  Add("a", Iota(12, 100));
  Add("b", Iota(7, 200));
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 5}, {"b", 5}}));
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 5}, {"b", 2}}));
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 2}, {"b", 1}}));
}

TEST_F(SchedulerTest, PartialPrefillLimitsCapConcurrentPrompts) {
  SchedulerConfig c = Config(100);
  c.long_prefill_token_threshold = 5;
  c.max_num_partial_prefills = 2;
  c.max_long_partial_prefills = 1;
  Init(c);
  Add("a", Iota(12, 100));  // long (> 5 tokens)
  Add("b", Iota(8, 200));   // long: waits for a's prompt to finish
  Add("c", Iota(4, 300));   // short, but behind b (first come, first served)
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 5}}));
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 5}}));
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 2}}));
  // a decodes; two prompts may now run together, one of them long.
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 1}, {"b", 5}, {"c", 4}}));
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 1}, {"b", 3}, {"c", 1}}));
}

TEST_F(SchedulerTest, PartialPrefillLimitsAreValidated) {
  SchedulerConfig c = Config(100);
  c.max_num_partial_prefills = 1;
  c.max_long_partial_prefills = 2;
  EXPECT_FALSE(c.Validate().ok());
  c.max_long_partial_prefills = 1;
  EXPECT_TRUE(c.Validate().ok());
  c.max_num_partial_prefills = 2;
  c.enable_chunked_prefill = false;
  c.max_model_len = 64;
  EXPECT_FALSE(c.Validate().ok());
}

TEST_F(SchedulerTest, MaxNumSeqsLimitsTheRunningSet) {
  SchedulerConfig c = Config(100);
  c.max_num_seqs = 2;
  Init(c);
  Add("a", Iota(4, 100), /*max_tokens=*/2);
  Add("b", Iota(4, 200), 2);
  Add("c", Iota(4, 300), 2);
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 4}, {"b", 4}}));
  EXPECT_EQ(sched_->num_waiting(), 1);
  std::vector<RequestUpdate> updates;
  EXPECT_EQ(PlanOf(Step({}, &updates)), (Plan{{"a", 1}, {"b", 1}}));
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0].status, RequestStatus::kFinishedLengthCapped);
  EXPECT_EQ(updates[0].new_token_ids, (Ids{1005}));
  SchedulerOutput s3 = Step();
  EXPECT_EQ(PlanOf(s3), (Plan{{"c", 4}}));
  EXPECT_EQ(s3.finished_request_ids, (Strings{"a", "b"}));
}

TEST_F(SchedulerTest, PriorityPolicyOrdersTheWaitingQueue) {
  SchedulerConfig c = Config(100);
  c.policy = SchedulingPolicy::kPriority;
  c.max_num_seqs = 1;
  Init(c);
  Add("x", Iota(4, 100), 16, /*priority=*/3);
  Add("y", Iota(4, 200), 16, 1);
  Add("z", Iota(4, 300), 16, 1);
  EXPECT_EQ(sched_->WaitingIds(), (Strings{"y", "z", "x"}));
  EXPECT_EQ(PlanOf(Step()), (Plan{{"y", 4}}));
}

// Two requests fill the pool; the first one's growth preempts the second.
class PreemptionTest : public testing::SchedulerFixture,
                       public ::testing::WithParamInterface<bool> {};

TEST_P(PreemptionTest, FcfsPreemptsTheLastRunningAndRecomputesItFromZero) {
  const bool caching = GetParam();
  Init(Config(64), {.block_size = 4, .num_blocks = 5, .enable_prefix_caching = caching});
  Add("a", Iota(7, 100), /*max_tokens=*/3);
  Add("b", Iota(7, 200), 9);
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 7}, {"b", 7}}));
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 1}, {"b", 1}}));
  EXPECT_EQ(sched_->kv_cache_manager().num_free_blocks(), 0);
  Add("c", Iota(3, 300), 8);

  // a needs a third block: b (last running) is preempted; nothing is admitted this step.
  SchedulerOutput s3 = Step();
  EXPECT_EQ(PlanOf(s3), (Plan{{"a", 1}}));
  EXPECT_EQ(s3.preempted_request_ids, (Strings{"b"}));
  EXPECT_TRUE(s3.swap_out.empty());
  EXPECT_EQ(Find(s3, "a").block_table, (Ids{1, 2, 4}));  // b's tail block, reused first
  EXPECT_EQ(sched_->WaitingIds(), (Strings{"b", "c"}));  // the victim goes to the front
  EXPECT_EQ(Req("b").status, RequestStatus::kPreempted);
  EXPECT_EQ(Req("b").num_computed_tokens, 0);
  EXPECT_EQ(Req("b").num_preemptions, 1);
  EXPECT_EQ(sched_->num_preemptions(), 1);
  EXPECT_EQ(sched_->num_running(), 0);  // a took its last token (max_tokens 3) and finished
  const std::vector<int32_t> b_tokens = AllTokens(Req("b"));
  ASSERT_EQ(b_tokens.size(), 9u);  // 7 prompt + 2 outputs

  // a finished in step 3 (max_tokens 3); b resumes with its prompt AND outputs.
  SchedulerOutput s4 = Step();
  EXPECT_EQ(s4.finished_request_ids, (Strings{"a"}));
  const ScheduledRequest& b = Find(s4, "b");
  EXPECT_TRUE(b.is_new);
  if (caching) {
    // b re-hits its first block; its second was handed to a.
    EXPECT_EQ(b.num_computed_tokens, 4);
    EXPECT_EQ(b.token_ids, Ids(b_tokens.begin() + 4, b_tokens.end()));
    EXPECT_EQ(b.block_table, (Ids{3, 4, 2}));
    EXPECT_EQ(sched_->kv_cache_manager().prefix_cache_stats().preempted_hits, 4);
  } else {
    EXPECT_EQ(b.num_computed_tokens, 0);
    EXPECT_EQ(b.token_ids, b_tokens);
    EXPECT_EQ(b.block_table, (Ids{3, 4, 2}));
  }
  EXPECT_TRUE(b.samples);
  EXPECT_EQ(Find(s4, "c").num_scheduled_tokens, 3);
  EXPECT_EQ(Req("b").num_output_tokens(), 3);  // continues where it stopped
}

INSTANTIATE_TEST_SUITE_P(Caching, PreemptionTest, ::testing::Bool());

TEST_F(SchedulerTest, FcfsVictimCanBeTheRequestItself) {
  Init(Config(64), {.block_size = 4, .num_blocks = 5});
  Add("a", Iota(6, 100), /*max_tokens=*/8);
  Add("b", Iota(8, 200), 8);
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 6}, {"b", 8}}));
  // b needs a third block and is itself the last running request.
  SchedulerOutput s2 = Step();
  EXPECT_EQ(PlanOf(s2), (Plan{{"a", 1}}));
  EXPECT_EQ(s2.preempted_request_ids, (Strings{"b"}));
  EXPECT_EQ(sched_->RunningIds(), (Strings{"a"}));
}

TEST_F(SchedulerTest, PriorityPreemptsTheWorstPriorityNotTheLast) {
  SchedulerConfig c = Config(64);
  c.policy = SchedulingPolicy::kPriority;
  Init(c, {.block_size = 4, .num_blocks = 6});
  Add("a", Iota(7, 100), /*max_tokens=*/8, /*priority=*/0);
  Add("b", Iota(7, 200), 8, 5);
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 7}, {"b", 7}}));
  Add("c", Iota(3, 300), 8, 1);
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 1}, {"b", 1}, {"c", 3}}));
  EXPECT_EQ(sched_->RunningIds(), (Strings{"a", "b", "c"}));
  SchedulerOutput s3 = Step();
  EXPECT_EQ(s3.preempted_request_ids, (Strings{"b"}));  // FCFS would have picked c
  EXPECT_EQ(PlanOf(s3), (Plan{{"a", 1}, {"c", 1}}));
}

TEST_F(SchedulerTest, AVictimPlannedThisStepReturnsItsBudget) {
  SchedulerConfig c = Config(64);
  c.policy = SchedulingPolicy::kPriority;
  Init(c, {.block_size = 4, .num_blocks = 4});
  Add("a", Iota(5, 100), /*max_tokens=*/7, /*priority=*/5);
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 5}}));
  Add("b", Iota(4, 200), 8, 0);
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 1}, {"b", 4}}));
  // a is planned first, then b cannot grow: a (worst priority) is preempted and unplanned.
  SchedulerOutput s3 = Step();
  EXPECT_EQ(PlanOf(s3), (Plan{{"b", 1}}));
  EXPECT_EQ(s3.total_num_scheduled_tokens, 1);
  EXPECT_EQ(s3.preempted_request_ids, (Strings{"a"}));
  EXPECT_EQ(Req("a").num_computed_tokens, 0);
  EXPECT_EQ(Req("a").num_output_tokens(), 2);  // the unplanned step produced nothing
}

TEST_F(SchedulerTest, SwapOutAndSwapInCopyLists) {
  SchedulerConfig c = Config(64);
  c.preemption_mode = PreemptionMode::kSwap;
  Init(c, {.block_size = 4, .num_blocks = 5, .num_secondary_blocks = 4});
  Add("a", Iota(7, 100), /*max_tokens=*/3);
  Add("b", Iota(7, 200), 9);
  Step();
  Step();
  SchedulerOutput s3 = Step();
  EXPECT_EQ(PlanOf(s3), (Plan{{"a", 1}}));
  EXPECT_EQ(s3.preempted_request_ids, (Strings{"b"}));
  EXPECT_EQ(s3.swap_out, (Copies{{3, 0}, {4, 1}}));
  EXPECT_TRUE(s3.swap_in.empty());
  EXPECT_EQ(Req("b").status, RequestStatus::kSwapped);
  EXPECT_EQ(Req("b").num_computed_tokens, 8);  // kept: its KV lives in host memory
  EXPECT_EQ(sched_->num_swapped(), 1);
  EXPECT_EQ(sched_->num_waiting(), 0);
  EXPECT_EQ(sched_->kv_cache_manager().secondary_pool().num_free_blocks(), 2);

  SchedulerOutput s4 = Step();
  EXPECT_TRUE(s4.swap_out.empty());
  EXPECT_EQ(s4.swap_in, (Copies{{0, 3}, {1, 4}}));
  const ScheduledRequest& b = Find(s4, "b");
  EXPECT_TRUE(b.is_new);
  EXPECT_EQ(b.num_computed_tokens, 8);
  EXPECT_EQ(b.token_ids, (Ids{1008}));  // only the token not yet computed
  EXPECT_EQ(b.block_table, (Ids{3, 4, 2}));
  EXPECT_EQ(sched_->num_swapped(), 0);
  EXPECT_EQ(sched_->kv_cache_manager().secondary_pool().num_free_blocks(), 4);
  EXPECT_EQ(Req("b").num_preemptions, 1);
}

TEST_F(SchedulerTest, SwapFallsBackToRecomputeWhenTheHostPoolIsFull) {
  SchedulerConfig c = Config(64);
  c.preemption_mode = PreemptionMode::kSwap;
  Init(c, {.block_size = 4, .num_blocks = 5, .num_secondary_blocks = 1});
  Add("a", Iota(7, 100), 3);
  Add("b", Iota(7, 200), 9);
  Step();
  Step();
  SchedulerOutput s3 = Step();
  EXPECT_EQ(s3.preempted_request_ids, (Strings{"b"}));
  EXPECT_TRUE(s3.swap_out.empty());
  EXPECT_EQ(Req("b").status, RequestStatus::kPreempted);
  EXPECT_EQ(Req("b").num_computed_tokens, 0);
  EXPECT_EQ(sched_->num_swapped(), 0);
}

TEST_F(SchedulerTest, AbortFreesEverythingAtOnce) {
  SchedulerConfig c = Config(64);
  c.preemption_mode = PreemptionMode::kSwap;
  Init(c, {.block_size = 4, .num_blocks = 5, .num_secondary_blocks = 4});
  Add("a", Iota(7, 100), 9);
  Add("b", Iota(7, 200), 9);
  Step();
  Step();
  Add("c", Iota(3, 300), 8);
  Step();  // b swapped out, c waiting, a running
  ASSERT_EQ(Req("b").status, RequestStatus::kSwapped);
  EXPECT_TRUE(sched_->Abort("a"));
  EXPECT_TRUE(sched_->Abort("b"));
  EXPECT_TRUE(sched_->Abort("c"));
  EXPECT_FALSE(sched_->Abort("a"));
  EXPECT_FALSE(sched_->Abort("nope"));
  EXPECT_EQ(sched_->GetRequest("a"), nullptr);
  EXPECT_EQ(sched_->num_swapped(), 0);
  testing::ExpectNoLeakedBlocks(sched_->kv_cache_manager());
  SchedulerOutput out = sched_->Schedule();
  EXPECT_FALSE(out.has_work());
  EXPECT_EQ(out.finished_request_ids, (Strings{"a", "b", "c"}));
}

TEST_F(SchedulerTest, AbortBetweenScheduleAndUpdateIsSafe) {
  Init(Config(64));
  Add("a", Iota(9));
  SchedulerOutput out = sched_->Schedule();
  EXPECT_TRUE(sched_->Abort("a"));
  EXPECT_TRUE(sched_->UpdateFromOutput(out, {{"a", {{5}, false}}}).empty());
  // a's blocks were cached for tokens never computed: they must not be served.
  Add("b", Iota(9));
  EXPECT_EQ(Find(Step(), "b").num_computed_tokens, 0);
}

TEST_F(SchedulerTest, PrefixHitsSkipCachedTokens) {
  Init(Config(64));
  Add("a", Iota(10));
  Step();
  Add("b", [] {
    std::vector<int32_t> t = Iota(8);
    t.push_back(77);
    t.push_back(78);
    return t;
  }());
  std::vector<RequestUpdate> updates;
  SchedulerOutput s2 = Step({}, &updates);
  const ScheduledRequest& b = Find(s2, "b");
  EXPECT_EQ(b.num_computed_tokens, 8);
  EXPECT_EQ(b.num_scheduled_tokens, 2);
  EXPECT_EQ(b.token_ids, (Ids{77, 78}));
  EXPECT_EQ(b.block_table, (Ids{1, 2, 4}));
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[1].request_id, "b");
  EXPECT_EQ(updates[1].num_cached_tokens, 8);

  // Asking for prompt logprobs skips the lookup.
  Request c = testing::MakeRequest("c", Iota(10));
  c.skip_prefix_cache = true;
  ASSERT_TRUE(sched_->AddRequest(std::move(c)).ok());
  EXPECT_EQ(Find(Step(), "c").num_computed_tokens, 0);
}

TEST_F(SchedulerTest, FinishOnStopMaxTokensAndMaxModelLen) {
  Init(Config(64, /*max_model_len=*/8));
  Add("stop", Iota(3, 100));
  Add("len", Iota(3, 200), /*max_tokens=*/2);
  Add("ctx", Iota(6, 300), /*max_tokens=*/100);
  std::vector<RequestUpdate> u;
  Step({"stop"}, &u);
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u[0].status, RequestStatus::kFinishedStopped);
  EXPECT_EQ(u[0].new_token_ids, (Ids{1003}));
  EXPECT_EQ(u[1].status, RequestStatus::kRunning);
  EXPECT_EQ(u[2].status, RequestStatus::kRunning);
  Step({}, &u);
  EXPECT_EQ(u[0].request_id, "len");
  EXPECT_EQ(u[0].status, RequestStatus::kFinishedLengthCapped);
  EXPECT_EQ(u[1].request_id, "ctx");
  EXPECT_EQ(u[1].status, RequestStatus::kFinishedLengthCapped);  // 8 tokens = max_model_len
  EXPECT_EQ(FinishReasonOf(u[1].status), FinishReason::kLength);
  EXPECT_FALSE(sched_->has_unfinished_requests());
}

TEST_F(SchedulerTest, StopStringsFinishRequestsFromOutside) {
  Init(Config(64));
  Add("a", Iota(5));
  Step();
  EXPECT_EQ(sched_->FinishRequests(Strings{"a"}, RequestStatus::kFinishedStopped), 1);
  EXPECT_EQ(sched_->Schedule().finished_request_ids, (Strings{"a"}));
}

TEST_F(SchedulerTest, SpeculativeTokensAreScheduledAndRejectedOnesRolledBack) {
  Init(Config(64));
  Add("a", Iota(4));
  Step();  // a: 5 tokens, 4 computed
  sched_->SetSpecTokens("a", {7, 8, 9});
  SchedulerOutput s2 = sched_->Schedule();
  const ScheduledRequest& a = Find(s2, "a");
  EXPECT_EQ(a.num_scheduled_tokens, 4);
  EXPECT_EQ(a.num_spec_tokens, 3);
  EXPECT_EQ(a.token_ids, (Ids{1004, 7, 8, 9}));
  EXPECT_TRUE(a.samples);
  EXPECT_EQ(a.block_table, (Ids{1, 2}));
  // Draft 7 accepted, 8 rejected: the target's token 50 replaces it.
  std::vector<RequestUpdate> u = sched_->UpdateFromOutput(s2, {{"a", {{7, 50}, false}}});
  EXPECT_EQ(u[0].new_token_ids, (Ids{7, 50}));
  EXPECT_EQ(Req("a").num_tokens(), 7);
  EXPECT_EQ(Req("a").num_computed_tokens, 6);
  EXPECT_TRUE(Req("a").spec_token_ids.empty());
  EXPECT_EQ(PlanOf(Step()), (Plan{{"a", 1}}));
}

TEST_F(SchedulerTest, DraftsAreTrimmedToTheBudget) {
  Init(Config(2));
  Add("a", Iota(2));
  Step();
  sched_->SetSpecTokens("a", {7, 8, 9});
  SchedulerOutput out = sched_->Schedule();
  EXPECT_EQ(Find(out, "a").num_spec_tokens, 1);
  EXPECT_EQ(Find(out, "a").token_ids, (Ids{1002, 7}));
  sched_->UpdateFromOutput(out, {{"a", {{7, 40}, false}}});
  EXPECT_EQ(Req("a").num_computed_tokens, 4);
}

TEST_F(SchedulerTest, AddRequestRejectsWhatCouldNeverRun) {
  Init(Config(64, 16), {.block_size = 4, .num_blocks = 4});
  EXPECT_EQ(sched_->AddRequest(testing::MakeRequest("e", {})).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sched_->AddRequest(testing::MakeRequest("long", Iota(16))).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(sched_->AddRequest(testing::MakeRequest("zero", Iota(3), 0)).code(),
            StatusCode::kInvalidArgument);
  // 12 prompt + 4 outputs = 16 tokens = 4 blocks > 3 usable.
  Status too_big = sched_->AddRequest(testing::MakeRequest("big", Iota(12), 4));
  EXPECT_EQ(too_big.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_big.message().find("4 KV blocks"), std::string::npos);
  ASSERT_TRUE(sched_->AddRequest(testing::MakeRequest("ok", Iota(8), 4)).ok());
  EXPECT_EQ(sched_->AddRequest(testing::MakeRequest("ok", Iota(3))).code(),
            StatusCode::kInvalidArgument);
}

TEST(SchedulerConfigTest, ValidateAndParse) {
  SchedulerConfig c;
  EXPECT_TRUE(c.Validate().ok());
  c.enable_chunked_prefill = false;
  c.max_model_len = 4096;
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);
  c.max_num_batched_tokens = 4096;
  EXPECT_TRUE(c.Validate().ok());
  c.max_num_seqs = 0;
  EXPECT_NE(c.Validate().message().find("--max-num-seqs"), std::string::npos);
  EXPECT_EQ(*ParseSchedulingPolicy("priority"), SchedulingPolicy::kPriority);
  EXPECT_EQ(*ParsePreemptionMode("swap"), PreemptionMode::kSwap);
  EXPECT_FALSE(ParsePreemptionMode("SWAP").ok());
  EXPECT_EQ(SchedulingPolicyName(SchedulingPolicy::kFcfs), "fcfs");
}

}  // namespace
}  // namespace pagellm
