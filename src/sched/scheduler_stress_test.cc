// End-to-end scheduling invariance with a stand-in model.
//
// The fake model's "KV" at position p is a hash of the KV at p - 1 and the token at p, so it
// depends on the whole prefix, and the sampled token is a function of the last position's KV.
// A fake executor stores these values in paged device/host block arrays exactly where the
// scheduler's block tables say, performs the swap copies, and reads earlier positions back from
// the cache. Any scheduling bug that loses, misplaces or wrongly shares KV (a bad prefix hit, a
// missed swap copy, a block reused while still needed) changes the tokens. Every configuration,
// including ones that preempt constantly, must reproduce the one-request-at-a-time reference
// token for token and leak no block.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kv/kv_test_util.h"
#include "sched/scheduler.h"

namespace pagellm {
namespace {

constexpr uint64_t kSeedKv = 0x9e3779b97f4a7c15ull;
constexpr uint64_t kPoison = 0xdeadbeefdeadbeefull;
constexpr int32_t kVocab = 97;
constexpr int32_t kStopToken = 0;
constexpr int32_t kMaxModelLen = 64;

uint64_t Mix(uint64_t prev, int32_t token, int32_t pos) {
  uint64_t x = prev ^
               (static_cast<uint64_t>(static_cast<uint32_t>(token)) * 0xbf58476d1ce4e5b9ull) ^
               (static_cast<uint64_t>(pos) << 40);
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 29;
  return x;
}

int32_t SampleFrom(uint64_t kv) {
  return static_cast<int32_t>((kv >> 17) % kVocab);
}

struct Spec {
  std::string id;
  std::vector<int32_t> prompt;
  int32_t max_tokens;
  int priority;
  int arrival_step;
  int abort_step;  // -1: never aborted
};

// Greedy generation of one request alone: the ground truth.
std::vector<int32_t> Reference(const Spec& s) {
  std::vector<int32_t> tokens = s.prompt;
  uint64_t kv = kSeedKv;
  size_t fed = 0;
  std::vector<int32_t> out;
  while (true) {
    for (; fed < tokens.size(); ++fed) kv = Mix(kv, tokens[fed], static_cast<int32_t>(fed));
    const int32_t t = SampleFrom(kv);
    tokens.push_back(t);
    out.push_back(t);
    if (t == kStopToken) break;
    if (static_cast<int32_t>(out.size()) >= s.max_tokens ||
        static_cast<int32_t>(tokens.size()) >= kMaxModelLen) {
      break;
    }
  }
  return out;
}

struct StressSetup {
  int32_t block_size;
  int32_t extra_blocks;  // beyond what one max_model_len request needs; small => preemption
  int32_t budget;
  bool caching;
  SchedulingPolicy policy;
  PreemptionMode mode;
  int32_t secondary_blocks;
  int32_t threshold;
  int32_t max_num_seqs;
  int32_t spec_k;
  bool expect_preemption;
};

std::string Name(const StressSetup& s) {
  return "bs" + std::to_string(s.block_size) + "_extra" + std::to_string(s.extra_blocks) +
         "_budget" + std::to_string(s.budget) + (s.caching ? "_apc" : "_noapc") +
         (s.policy == SchedulingPolicy::kFcfs ? "_fcfs" : "_prio") +
         (s.mode == PreemptionMode::kSwap ? "_swap" + std::to_string(s.secondary_blocks) : "") +
         "_thr" + std::to_string(s.threshold) + "_seqs" + std::to_string(s.max_num_seqs) + "_spec" +
         std::to_string(s.spec_k);
}

class FakeExecutor {
 public:
  FakeExecutor(int32_t block_size, int32_t num_blocks, int32_t num_host_blocks)
      : bs_(block_size),
        device_(static_cast<size_t>(block_size) * num_blocks, kPoison),
        host_(static_cast<size_t>(block_size) * num_host_blocks, kPoison) {}

  SampledTokensMap Execute(const SchedulerOutput& out) {
    EXPECT_TRUE(out.swap_out.empty() || out.swap_in.empty());
    for (const BlockCopy& c : out.swap_out) CopyBlock(device_, c.src, host_, c.dst);
    for (const BlockCopy& c : out.swap_in) CopyBlock(host_, c.src, device_, c.dst);
    SampledTokensMap sampled;
    // In scheduling order: a request may read blocks that an earlier one fills this step.
    for (const ScheduledRequest& s : out.scheduled) {
      EXPECT_EQ(static_cast<int32_t>(s.token_ids.size()), s.num_scheduled_tokens);
      const int32_t end = s.num_computed_tokens + s.num_scheduled_tokens;
      EXPECT_GE(static_cast<int32_t>(s.block_table.size()) * bs_, end) << s.request_id;
      for (int32_t id : s.block_table) EXPECT_NE(id, 0) << "null block in a table";
      std::vector<uint64_t> kv_at(s.num_scheduled_tokens);
      for (int32_t j = 0; j < s.num_scheduled_tokens; ++j) {
        const int32_t p = s.num_computed_tokens + j;
        const uint64_t prev = p == 0 ? kSeedKv : device_[Slot(s.block_table, p - 1)];
        EXPECT_NE(prev, kPoison) << s.request_id << " reads an unwritten slot at " << p - 1;
        kv_at[j] = Mix(prev, s.token_ids[j], p);
        device_[Slot(s.block_table, p)] = kv_at[j];
      }
      if (!s.samples) continue;
      // Greedy verification of drafts: emit the model's token at each position and stop at the
      // first draft it disagrees with.
      const int32_t first = s.num_scheduled_tokens - s.num_spec_tokens - 1;
      SampledTokens st;
      for (int32_t i = 0; i <= s.num_spec_tokens; ++i) {
        const int32_t t = SampleFrom(kv_at[first + i]);
        st.token_ids.push_back(t);
        if (t == kStopToken) {
          st.stop = true;
          break;
        }
        if (i < s.num_spec_tokens && s.token_ids[first + 1 + i] != t) break;
      }
      sampled[s.request_id] = st;
    }
    return sampled;
  }

 private:
  size_t Slot(const std::vector<int32_t>& table, int32_t pos) const {
    return static_cast<size_t>(table[pos / bs_]) * bs_ + pos % bs_;
  }
  void CopyBlock(const std::vector<uint64_t>& from, int32_t src, std::vector<uint64_t>& to,
                 int32_t dst) {
    std::copy_n(from.begin() + static_cast<size_t>(src) * bs_, bs_,
                to.begin() + static_cast<size_t>(dst) * bs_);
  }

  int32_t bs_;
  std::vector<uint64_t> device_;
  std::vector<uint64_t> host_;
};

std::vector<Spec> MakeWorkload(uint32_t seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::vector<int32_t>> shared;
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> p(uniform(8, 30));
    for (int32_t& t : p) t = uniform(1, kVocab - 1);
    shared.push_back(p);
  }
  std::vector<Spec> specs;
  for (int i = 0; i < 28; ++i) {
    Spec s;
    s.id = "r" + std::to_string(i);
    if (uniform(0, 9) < 6) s.prompt = shared[uniform(0, 2)];  // 60% share a prefix
    const int suffix = uniform(s.prompt.empty() ? 1 : 0, 12);
    for (int k = 0; k < suffix; ++k) s.prompt.push_back(uniform(1, kVocab - 1));
    s.max_tokens = uniform(1, 24);
    s.priority = uniform(0, 2);
    s.arrival_step = i < 10 ? 0 : uniform(0, 40);
    s.abort_step = uniform(0, 9) == 0 ? uniform(1, 30) : -1;
    specs.push_back(s);
  }
  return specs;
}

class SchedulerStressTest : public ::testing::TestWithParam<StressSetup> {};

TEST_P(SchedulerStressTest, OutputsMatchTheReferenceAndNoBlockLeaks) {
  const StressSetup& setup = GetParam();
  const int32_t num_blocks =
      1 + (kMaxModelLen + setup.block_size - 1) / setup.block_size + setup.extra_blocks;
  SchedulerConfig config;
  config.max_num_batched_tokens = setup.budget;
  config.max_model_len = kMaxModelLen;
  config.max_num_seqs = setup.max_num_seqs;
  config.long_prefill_token_threshold = setup.threshold;
  config.policy = setup.policy;
  config.preemption_mode = setup.mode;
  int64_t total_preemptions = 0, total_swapped_blocks = 0, total_hits = 0;

  for (uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<Spec> specs = MakeWorkload(seed);
    std::map<std::string, std::vector<int32_t>> reference, got;
    for (const Spec& s : specs) reference[s.id] = Reference(s);

    Scheduler sched(config, KvCacheManager(setup.block_size, num_blocks, setup.caching,
                                           kMaxModelLen, setup.secondary_blocks));
    FakeExecutor exec(setup.block_size, num_blocks, setup.secondary_blocks);
    std::mt19937 draft_rng(seed);
    std::map<std::string, bool> finished;
    int step = 0;
    size_t added = 0;
    for (; step < 5000; ++step) {
      for (const Spec& s : specs) {
        if (s.arrival_step == step) {
          Request r(s.id, s.prompt, s.max_tokens);
          r.priority = s.priority;
          ASSERT_TRUE(sched.AddRequest(std::move(r)).ok());
          ++added;
        }
        if (s.abort_step == step && !finished[s.id] && added > 0) {
          if (sched.Abort(s.id)) finished[s.id] = true;
        }
      }
      if (!sched.has_unfinished_requests() && added == specs.size()) break;
      SchedulerOutput out = sched.Schedule();
      EXPECT_LE(out.total_num_scheduled_tokens, setup.budget);
      EXPECT_LE(sched.num_running(), setup.max_num_seqs);
      for (const ScheduledRequest& s : out.scheduled) {
        if (setup.threshold > 0) {
          EXPECT_LE(s.num_scheduled_tokens, setup.threshold);
        }
      }
      total_swapped_blocks += static_cast<int64_t>(out.swap_out.size());
      const SampledTokensMap sampled = exec.Execute(out);
      for (const RequestUpdate& u : sched.UpdateFromOutput(out, sampled)) {
        std::vector<int32_t>& g = got[u.request_id];
        g.insert(g.end(), u.new_token_ids.begin(), u.new_token_ids.end());
        if (u.finished()) {
          finished[u.request_id] = true;
          continue;
        }
        // Drafts: the true continuation with some tokens corrupted, so both acceptance and
        // rejection happen.
        if (setup.spec_k > 0) {
          const std::vector<int32_t>& ref = reference[u.request_id];
          std::vector<int32_t> drafts;
          for (int32_t k = 0; k < setup.spec_k; ++k) {
            const size_t idx = g.size() + k;
            int32_t d = idx < ref.size() ? ref[idx] : 1;
            if (draft_rng() % 4 == 0) d = (d % (kVocab - 2)) + 1;  // likely wrong
            drafts.push_back(d);
          }
          sched.SetSpecTokens(u.request_id, drafts);
        }
      }
    }
    ASSERT_LT(step, 5000) << "scheduler made no progress";
    for (const Spec& s : specs) {
      const std::vector<int32_t>& want = reference[s.id];
      const std::vector<int32_t>& have = got[s.id];
      if (s.abort_step >= 0) {
        // Aborted: whatever was produced must be a prefix of the reference.
        ASSERT_LE(have.size(), want.size()) << s.id;
        EXPECT_TRUE(std::equal(have.begin(), have.end(), want.begin())) << s.id;
      } else {
        EXPECT_EQ(have, want) << s.id;
      }
    }
    testing::ExpectNoLeakedBlocks(sched.kv_cache_manager());
    total_preemptions += sched.num_preemptions();
    total_hits += sched.kv_cache_manager().prefix_cache_stats().hits +
                  sched.kv_cache_manager().prefix_cache_stats().preempted_hits;
  }
  if (setup.expect_preemption) {
    EXPECT_GT(total_preemptions, 0);
  }
  if (setup.mode == PreemptionMode::kSwap && setup.expect_preemption) {
    EXPECT_GT(total_swapped_blocks, 0);
  }
  if (setup.caching) {
    EXPECT_GT(total_hits, 0);
  }
  RecordProperty("preemptions", static_cast<int>(total_preemptions));
}

using P = SchedulingPolicy;
using M = PreemptionMode;
INSTANTIATE_TEST_SUITE_P(
    Configs, SchedulerStressTest,
    ::testing::Values(
        // Roomy cache, no preemption: plain continuous batching.
        StressSetup{4, 200, 4096, true, P::kFcfs, M::kRecompute, 0, 0, 256, 0, false},
        StressSetup{16, 50, 16, false, P::kFcfs, M::kRecompute, 0, 0, 256, 0, false},
        // Tight caches: constant preemption, every block size.
        StressSetup{1, 6, 16, true, P::kFcfs, M::kRecompute, 0, 0, 256, 0, true},
        StressSetup{4, 2, 64, true, P::kFcfs, M::kRecompute, 0, 0, 256, 0, true},
        StressSetup{4, 2, 64, false, P::kFcfs, M::kRecompute, 0, 0, 256, 0, true},
        StressSetup{16, 1, 4096, true, P::kFcfs, M::kRecompute, 0, 0, 256, 0, true},
        StressSetup{4, 2, 7, true, P::kPriority, M::kRecompute, 0, 5, 256, 0, true},
        StressSetup{4, 3, 64, true, P::kPriority, M::kRecompute, 0, 0, 3, 0, true},
        // Swap: roomy host pool, and one so small that most preemptions fall back to recompute.
        StressSetup{4, 2, 64, true, P::kFcfs, M::kSwap, 64, 0, 256, 0, true},
        StressSetup{4, 2, 64, false, P::kPriority, M::kSwap, 64, 0, 256, 0, true},
        StressSetup{1, 6, 16, true, P::kFcfs, M::kSwap, 12, 0, 256, 0, true},
        StressSetup{16, 1, 4096, true, P::kFcfs, M::kSwap, 2, 3, 256, 0, true},
        // Speculative decoding with rejections, with and without preemption.
        StressSetup{4, 200, 64, true, P::kFcfs, M::kRecompute, 0, 0, 256, 3, false},
        StressSetup{4, 2, 64, true, P::kFcfs, M::kRecompute, 0, 0, 256, 3, true},
        StressSetup{4, 2, 9, true, P::kPriority, M::kSwap, 32, 0, 256, 2, true}),
    [](const ::testing::TestParamInfo<StressSetup>& info) { return Name(info.param); });

}  // namespace
}  // namespace pagellm
