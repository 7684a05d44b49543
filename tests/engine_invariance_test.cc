// Batch invariance of the paged, continuously batched engine: 64 requests of mixed lengths
// give token-for-token identical outputs (and bitwise identical logprobs) whether they run one
// at a time or all together, with block size 1, 16 or 256, a token budget of 16 or 4096, and
// a KV budget so small that preemption happens (recompute and swap). The whole KV cache is
// poisoned with NaN first, so reading any slot that was never written would show. Every run
// ends with every block free.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/llm.h"
#include "engine_test_util.h"

namespace pagellm {
namespace {

namespace fs = std::filesystem;
const std::string kShared = PAGELLM_SHARED_DIR;

// Prompts: slices of TinyStories text tokenized by the model, 1..~300 tokens; outputs 1..48.
EngineWorkload MakeWorkload(LLM& llm, int n, uint32_t seed) {
  std::ifstream in(kShared + "/data/tinystories_sample.txt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::mt19937 rng(seed);
  EngineWorkload w;
  const int vocab = llm.core().model_config().vocab_size;
  for (int i = 0; i < n; ++i) {
    PromptInput p;
    if (!text.empty()) {
      const size_t start = rng() % (text.size() / 2);
      const size_t len = 1 + rng() % 1200;
      p.token_ids = llm.Tokenize(text.substr(start, len));
      if (p.token_ids.size() > 300) p.token_ids.resize(300);
    }
    if (p.token_ids.empty()) p.token_ids = {1};
    if (i % 7 == 0) p.token_ids.resize(1);  // some BOS-only prompts
    for (auto& id : p.token_ids) id = std::min(id, vocab - 1);
    SamplingParams sp;
    sp.temperature = 0;
    sp.ignore_eos = true;
    sp.max_tokens = 1 + static_cast<int>(rng() % 48);
    sp.logprobs = 1;
    w.prompts.push_back(std::move(p));
    w.params.push_back(sp);
  }
  return w;
}

void CheckInvariance(const std::string& model) {
  EngineConfig base;
  base.model = model;
  base.max_model_len = 512;
  base.num_gpu_blocks_override = 4096;
  base.scheduler.max_num_seqs = 64;
  base.scheduler.max_num_batched_tokens = 512;
  auto probe = LLM::Create(base);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  const EngineWorkload w = MakeWorkload(**probe, 64, 7);
  probe->reset();

  EngineConfig serial = base;
  serial.scheduler.max_num_seqs = 1;
  const EngineRun ref = RunOnPoisonedEngine(serial, w, /*one_at_a_time=*/true);
  ASSERT_EQ(ref.outputs.size(), 64u);

  for (int block_size : {1, 16, 256}) {
    EngineConfig c = base;
    c.block_size = block_size;
    c.num_gpu_blocks_override = 64 * 512 / block_size + 64;
    ExpectIdenticalOutputs(ref, RunOnPoisonedEngine(c, w),
                           "block_size " + std::to_string(block_size));
  }
  for (int budget : {16, 4096}) {
    EngineConfig c = base;
    c.scheduler.max_num_batched_tokens = budget;
    ExpectIdenticalOutputs(ref, RunOnPoisonedEngine(c, w),
                           "max_num_batched_tokens " + std::to_string(budget));
  }
  for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    EngineConfig c = base;
    c.num_gpu_blocks_override = 40;  // 640 tokens for 64 requests of up to ~350 tokens
    c.scheduler.preemption_mode = mode;
    c.swap_space_gib = 0.001;  // a small secondary pool: swap, then fall back
    const EngineRun r = RunOnPoisonedEngine(c, w);
    ExpectIdenticalOutputs(ref, r,
                           std::string("preemption ") + std::string(PreemptionModeName(mode)));
    EXPECT_GT(r.stats.num_preemptions, 0) << "the KV budget was meant to force preemption";
    std::printf("[ info ] %s: %s preemption mode: %lld preemptions\n", model.c_str(),
                std::string(PreemptionModeName(mode)).c_str(),
                static_cast<long long>(r.stats.num_preemptions));
  }
}

TEST(EngineInvarianceTest, Stories260K) {
  const std::string model = kShared + "/models/stories260K";
  if (!fs::exists(model + "/model.safetensors")) GTEST_SKIP() << "shared assets absent";
  CheckInvariance(model);
}

// Quantised KV caches keep the same guarantees: a request's tokens and logprobs do not depend
// on batching, block size or swap preemption (quantisation is per token and head, so a row's
// bytes do not depend on its neighbours). Smaller workload per dtype to stay fast.
TEST(EngineInvarianceTest, QuantizedKvCaches) {
  const std::string model = kShared + "/models/stories260K";
  if (!fs::exists(model + "/model.safetensors")) GTEST_SKIP() << "shared assets absent";
  for (KvCacheDtype dt :
       {KvCacheDtype::kBFloat16, KvCacheDtype::kFp8, KvCacheDtype::kInt8, KvCacheDtype::kInt4}) {
    const std::string name(KvCacheDtypeName(dt));
    EngineConfig base;
    base.model = model;
    base.kv_cache_dtype = dt;
    base.max_model_len = 512;
    base.num_gpu_blocks_override = 2048;
    base.scheduler.max_num_seqs = 32;
    base.scheduler.max_num_batched_tokens = 512;
    auto probe = LLM::Create(base);
    ASSERT_TRUE(probe.ok()) << probe.status().ToString();
    const EngineWorkload w = MakeWorkload(**probe, 24, 11);
    probe->reset();
    EngineConfig serial = base;
    serial.scheduler.max_num_seqs = 1;
    const EngineRun ref = RunOnPoisonedEngine(serial, w, /*one_at_a_time=*/true);
    ASSERT_EQ(ref.outputs.size(), 24u);
    EngineConfig c = base;
    c.block_size = 7;
    ExpectIdenticalOutputs(ref, RunOnPoisonedEngine(c, w), name + " block_size 7");
    c = base;
    c.num_gpu_blocks_override = 40;  // 640 tokens: preemption, one request still fits
    c.scheduler.preemption_mode = PreemptionMode::kSwap;
    c.swap_space_gib = 0.001;
    const EngineRun r = RunOnPoisonedEngine(c, w);
    ExpectIdenticalOutputs(ref, r, name + " swap preemption");
    EXPECT_GT(r.stats.num_preemptions, 0) << name;
  }
}

TEST(EngineInvarianceTest, RandomGqaModel) {
  if (!fs::exists(kShared + "/models/stories260K/tokenizer.model"))
    GTEST_SKIP() << "shared assets absent (the random model borrows tok512)";
  const std::string dir = GenerateRandomTok512Model(
      "pagellm_invariance_gqa",
      "--layers 4 --hidden 128 --heads 8 --kv-heads 2 --head-dim 16 --intermediate 256", 3);
  if (dir.empty()) GTEST_SKIP() << "model generator unavailable";
  CheckInvariance(dir);
}

}  // namespace
}  // namespace pagellm
