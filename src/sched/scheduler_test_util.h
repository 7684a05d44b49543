// Fixture shared by the scheduler tests: builds a scheduler, runs steps with a stand-in for the
// model, and checks on teardown that no KV block outlived its request.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kv/kv_test_util.h"
#include "sched/scheduler.h"

namespace pagellm::testing {

// (request id, scheduled tokens) in output order.
using Plan = std::vector<std::pair<std::string, int32_t>>;

inline Plan PlanOf(const SchedulerOutput& out) {
  Plan p;
  for (const ScheduledRequest& s : out.scheduled)
    p.emplace_back(s.request_id, s.num_scheduled_tokens);
  return p;
}

inline const ScheduledRequest& Find(const SchedulerOutput& out, const std::string& id) {
  for (const ScheduledRequest& s : out.scheduled) {
    if (s.request_id == id) return s;
  }
  ADD_FAILURE() << id << " not scheduled";
  static const ScheduledRequest kNone;
  return kNone;
}

class SchedulerFixture : public ::testing::Test {
 protected:
  struct Options {
    int32_t block_size = 4;
    int32_t num_blocks = 64;  // including the null block
    bool enable_prefix_caching = true;
    int32_t num_secondary_blocks = 0;
  };

  void Init(const SchedulerConfig& config, const Options& options) {
    sched_ = std::make_unique<Scheduler>(
        config,
        KvCacheManager(options.block_size, options.num_blocks, options.enable_prefix_caching,
                       config.max_model_len, options.num_secondary_blocks));
  }
  void Init(const SchedulerConfig& config) { Init(config, Options{}); }

  // Every request still alive legitimately holds blocks: abort them all, then nothing may be
  // left in use anywhere.
  void TearDown() override {
    if (!sched_) return;
    std::vector<std::string> live = sched_->RunningIds();
    for (std::string& id : sched_->WaitingIds()) live.push_back(std::move(id));
    EXPECT_EQ(sched_->FinishRequests(live, RequestStatus::kFinishedAborted),
              static_cast<int>(live.size()));
    EXPECT_FALSE(sched_->has_unfinished_requests());
    ExpectNoLeakedBlocks(sched_->kv_cache_manager());
  }

  void Add(const std::string& id, std::vector<int32_t> prompt, int32_t max_tokens = 16,
           int priority = 0) {
    Request r = MakeRequest(id, std::move(prompt), max_tokens);
    r.priority = priority;
    ASSERT_TRUE(sched_->AddRequest(std::move(r)).ok());
  }

  // The token the stand-in model samples: a function of the request's length, so tests can
  // predict it.
  static int32_t TokenFor(const Request& r) { return 1000 + r.num_tokens(); }

  // Schedules and "executes" one step. Requests in `stop` report a stop on their token.
  SchedulerOutput Step(const std::set<std::string>& stop = {},
                       std::vector<RequestUpdate>* updates = nullptr) {
    SchedulerOutput out = sched_->Schedule();
    SampledTokensMap sampled;
    for (const ScheduledRequest& s : out.scheduled) {
      if (!s.samples) continue;
      sampled[s.request_id] = {{TokenFor(*sched_->GetRequest(s.request_id))},
                               stop.contains(s.request_id)};
    }
    std::vector<RequestUpdate> u = sched_->UpdateFromOutput(out, sampled);
    if (updates) *updates = std::move(u);
    return out;
  }

  const Request& Req(const std::string& id) {
    const Request* r = sched_->GetRequest(id);
    CHECK(r != nullptr) << id;
    return *r;
  }

  std::unique_ptr<Scheduler> sched_;
};

}  // namespace pagellm::testing
