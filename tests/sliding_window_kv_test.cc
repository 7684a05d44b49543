// Sliding-window KV on tiny-gemma3 (5 local layers with a window of 8 tokens, 1 global layer):
// the engine keeps one block table per KV cache group and frees the blocks of local layers
// that fell out of the window (kv/kv_cache_groups.h). With requests much longer than the
// window:
//   - greedy outputs (ids, bitwise logprobs) equal the full-KV path
//     (--disable-hybrid-kv-cache-manager) run one request at a time: batched, with prefix
//     caching on and off, in small prefill chunks, and under preemption by recompute and by
//     swap; every run ends with every block free on a NaN-poisoned cache (a read of a freed
//     block would read the poisoned null block);
//   - while one long request decodes, each local group holds at most window / block_size + 1
//     blocks, and the whole request never more than the planner's blocks per request.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/engine_core.h"
#include "engine/llm.h"
#include "engine_test_util.h"
#include "kv/kv_cache_groups.h"

namespace pagellm {
namespace {

namespace fs = std::filesystem;
const std::string kShared = PAGELLM_SHARED_DIR;

std::string GenerateTinyGemma3() {
  if (!fs::exists(kShared + "/models/stories260K/tokenizer.model")) return "";
  const fs::path dir = fs::temp_directory_path() / "pagellm_swa_tiny_gemma3";
  const std::string cmd = std::string("/usr/bin/python3 ") + PAGELLM_SOURCE_DIR +
                          "/tools/gen_model.py --preset tiny-gemma3 --quiet --seed 5 "
                          "--shared-dir " +
                          kShared + " --out " + dir.string();
  if (std::system(cmd.c_str()) != 0) return "";
  return dir.string();
}

// 16 requests: 4 shared prefixes of 24 tokens (3 windows) + 8..40 own tokens; outputs 10..60.
EngineWorkload MakeWorkload(LLM& llm) {
  std::ifstream in(kShared + "/data/tinystories_sample.txt");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::mt19937 rng(29);
  const int vocab = llm.core().model_config().vocab_size;
  auto slice = [&](size_t len) {
    const size_t start = rng() % (text.size() - 8 * len);
    std::vector<int32_t> ids = llm.Tokenize(text.substr(start, 8 * len));
    if (ids.size() > len) ids.resize(len);
    for (auto& id : ids) id = std::min(id, vocab - 1);
    return ids;
  };
  std::vector<std::vector<int32_t>> prefixes;
  for (int g = 0; g < 4; ++g) prefixes.push_back(slice(24));
  EngineWorkload w;
  for (int i = 0; i < 16; ++i) {
    PromptInput p;
    p.token_ids = prefixes[i % 4];
    const std::vector<int32_t> own = slice(8 + rng() % 33);
    p.token_ids.insert(p.token_ids.end(), own.begin(), own.end());
    SamplingParams sp;
    sp.temperature = 0;
    sp.ignore_eos = true;
    sp.max_tokens = 10 + static_cast<int>(rng() % 51);
    sp.logprobs = 2;
    if (i % 7 == 3) sp.prompt_logprobs = 1;
    w.prompts.push_back(std::move(p));
    w.params.push_back(sp);
  }
  return w;
}

EngineConfig BaseConfig(const std::string& model) {
  EngineConfig c;
  c.model = model;
  c.block_size = 4;
  c.max_model_len = 256;
  c.num_gpu_blocks_override = 2048;
  c.scheduler.max_num_seqs = 16;
  c.scheduler.max_num_batched_tokens = 256;
  return c;
}

TEST(SlidingWindowKvTest, OutputsEqualTheFullKvPath) {
  const std::string model = GenerateTinyGemma3();
  if (model.empty()) GTEST_SKIP() << "shared assets or model generator unavailable";
  const EngineConfig base = BaseConfig(model);
  auto probe = LLM::Create(base);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  ASSERT_EQ(probe->get()->core().kv_report().kv_group_windows,
            (std::vector<int32_t>{0, 8, 8, 8, 8, 8}));
  const EngineWorkload w = MakeWorkload(**probe);
  probe->reset();

  EngineConfig full = base;
  full.disable_hybrid_kv_cache_manager = true;
  full.enable_prefix_caching = false;
  full.scheduler.max_num_seqs = 1;
  const EngineRun ref = RunOnPoisonedEngine(full, w, /*one_at_a_time=*/true);
  ASSERT_EQ(ref.outputs.size(), w.prompts.size());

  struct Case {
    std::string name;
    EngineConfig config;
    bool expect_preemption = false;
  };
  std::vector<Case> cases;
  {
    EngineConfig c = base;
    c.enable_prefix_caching = false;
    cases.push_back({"batched, prefix caching off", c});
  }
  cases.push_back({"batched, prefix caching on", base});
  {
    EngineConfig c = base;
    c.scheduler.max_num_batched_tokens = 12;  // chunks longer than the window, and shorter
    cases.push_back({"chunks of 12", c});
  }
  {
    EngineConfig c = base;
    c.block_size = 3;  // does not divide the window
    cases.push_back({"block size 3", c});
  }
  for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    EngineConfig c = base;
    // A request of ~120 tokens holds 30 + 5 x 3 blocks at block size 4: 16 of them cannot run
    // at once in 160 blocks.
    c.num_gpu_blocks_override = 160;
    // Chunks of 16 keep a request's worst step (31 + 5 x 7 blocks) within the pool.
    c.scheduler.max_num_batched_tokens = 16;
    c.scheduler.preemption_mode = mode;
    c.swap_space_gib = 0.001;
    cases.push_back({"preemption " + std::string(PreemptionModeName(mode)), c, true});
  }
  for (const Case& k : cases) {
    const EngineRun r = RunOnPoisonedEngine(k.config, w);
    ExpectIdenticalOutputs(ref, r, k.name);
    // (Under preemption the pool is too small to keep freed prefixes cached for long.)
    if (k.config.enable_prefix_caching && !k.expect_preemption) {
      EXPECT_GT(r.stats.prefix_cache_hits, 0) << k.name;
    }
    if (k.expect_preemption) {
      EXPECT_GT(r.stats.num_preemptions, 0) << k.name;
    }
    std::printf("[ info ] %s: %lld prompt tokens hit, %lld preemptions\n", k.name.c_str(),
                static_cast<long long>(r.stats.prefix_cache_hits),
                static_cast<long long>(r.stats.num_preemptions));
  }
}

TEST(SlidingWindowKvTest, LocalGroupsHoldOnlyTheWindowWhileDecoding) {
  const std::string model = GenerateTinyGemma3();
  if (model.empty()) GTEST_SKIP() << "shared assets or model generator unavailable";
  EngineConfig c = BaseConfig(model);
  auto core = EngineCore::Create(c);
  ASSERT_TRUE(core.ok()) << core.status().ToString();
  (*core)->PoisonKvCache();
  EngineRequest req;
  req.request_id = "long";
  for (int i = 0; i < 40; ++i) req.prompt_token_ids.push_back(3 + (i * 7) % 500);
  req.params.temperature = 0;
  req.params.ignore_eos = true;
  req.params.max_tokens = 200;
  ASSERT_TRUE((*core)->AddRequest(std::move(req)).ok());
  const KvCacheManager& kv = (*core)->kv_cache_manager();
  const int32_t bound = 8 / 4 + 1;
  int32_t max_local = 0, max_total = 0, steps = 0;
  while ((*core)->HasUnfinishedRequests()) {
    auto out = (*core)->Step();
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::span<const std::vector<int32_t>> tables = kv.BlockTables("long");
    if (tables.empty()) continue;  // finished this step
    ++steps;
    ASSERT_EQ(tables.size(), 6u);
    for (size_t g = 1; g < tables.size(); ++g) {
      const auto held = static_cast<int32_t>(
          std::count_if(tables[g].begin(), tables[g].end(), [](int32_t b) { return b != 0; }));
      // The prefill step holds the 40 prompt tokens; decode steps only the window.
      if (steps > 1) {
        EXPECT_LE(held, bound) << "step " << steps << " group " << g;
      }
      if (steps > 1) max_local = std::max(max_local, held);
    }
    max_total = std::max(max_total, kv.NumBlocksHeld("long"));
  }
  EXPECT_EQ(max_local, bound);
  // 240 tokens: the global group's 60 blocks + 5 x 3, what the planner counts per request.
  EXPECT_EQ(max_total, 60 + 5 * bound);
  EXPECT_EQ(max_total, BlocksPerRequest(kv.group_windows(), 4, 240));
  EXPECT_EQ((*core)->stats().num_free_blocks, (*core)->stats().num_usable_blocks);
  std::printf(
      "[ info ] 240-token request, window 8, block size 4: at most %d blocks per local "
      "group (bound %d), %d blocks in all (full KV: %d)\n",
      max_local, bound, max_total, 6 * 60);
}

}  // namespace
}  // namespace pagellm
