// Randomized check of the KV manager with a full and a window group: a shadow of every slot's
// content (which group wrote it, for which token prefix) is kept while requests sharing
// prefixes are scheduled in random chunks, preempted by recompute, resumed through prefix hits
// and freed. Every key a query reads (all positions for the full group, the window for the
// window group) must hold what that request would have written there itself; writes never
// go to the null block. This found a block handed to one group while another group's hit on
// it was still in the free queue.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_test_util.h"

namespace pagellm {
namespace {

// Identity of the token prefix ending at pos.
uint64_t PrefixId(const Request& r, int pos) {
  uint64_t h = 0;
  std::span<const int32_t> t = r.all_token_ids();
  for (int i = 0; i <= pos; ++i) h = h * 1000003 + static_cast<uint64_t>(t[i]) + 1;
  return h;
}

struct Planned {
  Request* req;
  int start;
  int n;
  std::vector<std::vector<int32_t>> tables;
};

void RunShadowSchedule(uint32_t seed, int num_blocks) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed << ", " << num_blocks << " blocks");
  constexpr int kBlockSize = 4;
  const std::vector<int32_t> windows = {0, 8};
  KvCacheManager kv(kBlockSize, num_blocks, true, 256, 0, "", windows);
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> prefixes(3);
  for (auto& p : prefixes)
    for (int i = 0; i < 20; ++i) p.push_back(static_cast<int32_t>(rng() % 50));
  std::vector<std::unique_ptr<Request>> reqs;
  std::vector<Request*> running, waiting;
  for (int r = 0; r < 10; ++r) {
    std::vector<int32_t> t = prefixes[r % 3];
    for (int i = 0; i < 6 + r; ++i) t.push_back(static_cast<int32_t>(rng() % 50));
    reqs.push_back(std::make_unique<Request>("r" + std::to_string(r), t, 30));
    waiting.push_back(reqs.back().get());
  }
  // (block, slot) -> (group, prefix id) of the last write.
  std::map<std::pair<int, int>, std::pair<int, uint64_t>> content;
  int errors = 0;
  for (int step = 0; step < 2000 && (!running.empty() || !waiting.empty()); ++step) {
    std::vector<Planned> plans;
    for (size_t i = 0; i < running.size(); ++i) {
      Request* r = running[i];
      const int n = std::min<int>(r->num_tokens() - r->num_computed_tokens, 1 + rng() % 6);
      bool scheduled = true;
      while (!kv.AllocateSlots(*r, n)) {  // preempt the last running request (recompute)
        Request* v = running.back();
        running.pop_back();
        std::erase_if(plans, [&](const Planned& p) { return p.req == v; });
        kv.Free(*v);
        v->num_computed_tokens = 0;
        ++v->num_preemptions;
        waiting.insert(waiting.begin(), v);
        if (v == r) {
          scheduled = false;
          break;
        }
      }
      if (!scheduled) break;
      plans.push_back({r, r->num_computed_tokens, n, {}});
    }
    while (!waiting.empty() && running.size() < 6) {
      Request* r = waiting.front();
      const ComputedBlocks hit = kv.GetComputedBlocks(*r);
      const int n = std::min<int>(r->num_tokens() - hit.num_tokens, 1 + rng() % 8);
      if (!kv.AllocateSlots(*r, n, hit, 0)) break;
      r->num_computed_tokens += hit.num_tokens;
      waiting.erase(waiting.begin());
      running.push_back(r);
      plans.push_back({r, r->num_computed_tokens, n, {}});
    }
    // The forward pass: every write of the step, then every read.
    for (Planned& p : plans) {
      std::span<const std::vector<int32_t>> t = kv.BlockTables(p.req->id());
      p.tables.assign(t.begin(), t.end());
      for (int pos = p.start; pos < p.start + p.n; ++pos) {
        for (int g = 0; g < 2; ++g) {
          const int b = p.tables[g][pos / kBlockSize];
          if (b == BlockPool::kNullBlockId) ++errors;
          content[{b, pos % kBlockSize}] = {g, PrefixId(*p.req, pos)};
        }
      }
    }
    for (const Planned& p : plans) {
      for (int q = p.start; q < p.start + p.n; ++q) {
        for (int g = 0; g < 2; ++g) {
          for (int k = windows[g] ? std::max(0, q - windows[g] + 1) : 0; k <= q; ++k) {
            const int b = p.tables[g][k / kBlockSize];
            auto it = content.find({b, k % kBlockSize});
            const std::pair<int, uint64_t> want{g, PrefixId(*p.req, k)};
            if (b == BlockPool::kNullBlockId || it == content.end() || it->second != want) {
              if (++errors <= 3)
                ADD_FAILURE() << "step " << step << " " << p.req->id() << " group " << g
                              << " query " << q << " key " << k << " block " << b;
            }
          }
        }
      }
    }
    for (const Planned& p : plans) {
      Request* r = p.req;
      r->num_computed_tokens += p.n;
      if (r->num_computed_tokens < r->num_tokens()) continue;
      if (r->num_tokens() - r->num_prompt_tokens() >= 12) {
        kv.Free(*r);
        std::erase(running, r);
      } else {
        r->AppendOutputToken(static_cast<int32_t>(rng() % 50));
      }
    }
  }
  EXPECT_EQ(errors, 0);
  EXPECT_TRUE(running.empty() && waiting.empty()) << "schedule did not finish";
  testing::ExpectNoLeakedBlocks(kv);
}

TEST(KvCacheGroupsStressTest, ReadsSeeTheirOwnKvUnderPreemptionAndHits) {
  for (uint32_t seed = 1; seed <= 20; ++seed)
    for (int num_blocks : {30, 40, 80}) RunShadowSchedule(seed, num_blocks);
}

}  // namespace
}  // namespace pagellm
