// Prefix caching never changes what a request computes: at temperature 0, 64 requests of which
// 80% of the prompt tokens are shared (8 system-prompt-like prefixes, each followed by a unique
// question) give token-for-token identical outputs and bitwise identical logprobs with
// --enable-prefix-caching on and off, batched or one at a time (where every request after the
// first of its group hits), with small prefill chunks, and with preemption forced in recompute
// and in swap mode (preempted requests re-hit their own blocks). Some requests carry a
// cache_salt (they may only hit their own tenant's blocks) and some ask for prompt logprobs
// (which skip the lookup): their outputs must not change either. Every KV cache dtype the
// engine offers is run, each against its own caching-off reference. The cache is NaN-poisoned
// first, and every run must end with every block free.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "base/kv_cache_dtype.h"
#include "engine/llm.h"
#include "engine_test_util.h"

namespace pagellm {
namespace {

namespace fs = std::filesystem;
const std::string kShared = PAGELLM_SHARED_DIR;

struct Workload : EngineWorkload {
  int64_t shared_tokens = 0;
  int64_t total_tokens = 0;
};

std::vector<int32_t> Slice(LLM& llm, const std::string& text, std::mt19937& rng, size_t len,
                           bool with_bos) {
  const size_t start = rng() % (text.size() - 4 * len);
  std::vector<int32_t> ids = llm.Tokenize(text.substr(start, 4 * len));
  if (!with_bos && !ids.empty()) ids.erase(ids.begin());
  if (ids.size() > len) ids.resize(len);
  return ids;
}

// 8 prefixes of 160 tokens; 64 requests = prefix + 40 unique tokens; outputs 4..27. Requests
// come in runs of 4 of the same prefix, and the 8 prefixes come round twice, so hits happen
// both right after a prefix was computed and after 7 other prefixes went through the cache.
Workload MakeWorkload(LLM& llm) {
  std::ifstream in(kShared + "/data/tinystories_sample.txt");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::mt19937 rng(11);
  const int vocab = llm.core().model_config().vocab_size;
  std::vector<std::vector<int32_t>> prefixes;
  for (int g = 0; g < 8; ++g) prefixes.push_back(Slice(llm, text, rng, 160, true));
  Workload w;
  for (int i = 0; i < 64; ++i) {
    PromptInput p;
    p.token_ids = prefixes[(i / 4) % 8];
    const std::vector<int32_t> suffix = Slice(llm, text, rng, 40, false);
    p.token_ids.insert(p.token_ids.end(), suffix.begin(), suffix.end());
    for (auto& id : p.token_ids) id = std::min(id, vocab - 1);
    if (i % 5 == 4) p.cache_salt = (i % 10 == 4) ? "tenant-a" : "tenant-b";
    w.shared_tokens += static_cast<int64_t>(prefixes[(i / 4) % 8].size());
    w.total_tokens += static_cast<int64_t>(p.token_ids.size());
    SamplingParams sp;
    sp.temperature = 0;
    sp.ignore_eos = true;
    sp.max_tokens = 4 + static_cast<int>(rng() % 24);
    sp.logprobs = 1;
    if (i % 9 == 3) sp.prompt_logprobs = 1;
    w.prompts.push_back(std::move(p));
    w.params.push_back(sp);
  }
  return w;
}

// Requests with prompt logprobs never hit; salted requests hit only their tenant's blocks.
void ExpectCachedTokensRespectTheRules(const Workload& w, const EngineRun& r,
                                       const std::string& what) {
  for (size_t i = 0; i < w.prompts.size(); ++i) {
    if (w.params[i].prompt_logprobs.has_value()) {
      EXPECT_EQ(r.outputs[i].num_cached_tokens, 0) << what << ": request " << i;
    }
    EXPECT_LT(r.outputs[i].num_cached_tokens, static_cast<int>(w.prompts[i].token_ids.size()))
        << what << ": a hit must leave the last prompt token to compute";
  }
}

// Every KV cache dtype; "auto" resolves to the model's own dtype.
std::vector<KvCacheDtype> KvCacheDtypesUnderTest() {
  return {KvCacheDtype::kAuto,    KvCacheDtype::kBFloat16, KvCacheDtype::kFloat16,
          KvCacheDtype::kFp8E4m3, KvCacheDtype::kFp8E5m2,  KvCacheDtype::kInt8,
          KvCacheDtype::kInt4};
}

void CheckPrefixCachingIdentity(const std::string& model) {
  EngineConfig base;
  base.model = model;
  base.max_model_len = 512;
  base.num_gpu_blocks_override = 2048;
  base.scheduler.max_num_seqs = 64;
  base.scheduler.max_num_batched_tokens = 512;
  auto probe = LLM::Create(base);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  const Workload w = MakeWorkload(**probe);
  probe->reset();
  const double shared = static_cast<double>(w.shared_tokens) / static_cast<double>(w.total_tokens);
  ASSERT_GE(shared, 0.78) << "the workload is meant to share ~80% of its prompt tokens";

  for (const KvCacheDtype kv_dtype : KvCacheDtypesUnderTest()) {
    const std::string dtype(KvCacheDtypeName(kv_dtype));
    SCOPED_TRACE("kv cache dtype " + dtype);
    base.kv_cache_dtype = kv_dtype;
    EngineConfig off = base;
    off.enable_prefix_caching = false;
    const EngineRun ref = RunOnPoisonedEngine(off, w);
    ASSERT_EQ(ref.outputs.size(), w.prompts.size());
    EXPECT_EQ(ref.stats.prefix_cache_hits, 0);

    struct Case {
      std::string name;
      EngineConfig config;
      bool one_at_a_time = false;
      bool expect_preemption = false;
    };
    std::vector<Case> cases;
    cases.push_back({"batched", base});
    cases.push_back({"one at a time", base, true});
    {
      EngineConfig c = base;
      c.scheduler.max_num_batched_tokens = 24;  // prefills arrive in small chunks
      c.block_size = 4;
      c.num_gpu_blocks_override = 8192;
      cases.push_back({"chunked prefill, block size 4", c});
    }
    for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
      EngineConfig c = base;
      c.num_gpu_blocks_override = 48;  // 768 tokens for 64 requests of ~200 + up to 27
      c.scheduler.preemption_mode = mode;
      c.swap_space_gib = 0.001;
      cases.push_back({"preemption " + std::string(PreemptionModeName(mode)), c, false, true});
    }
    for (const Case& k : cases) {
      const EngineRun r = RunOnPoisonedEngine(k.config, w, k.one_at_a_time);
      ExpectIdenticalOutputs(ref, r, k.name);
      ExpectCachedTokensRespectTheRules(w, r, k.name);
      EXPECT_GT(r.stats.prefix_cache_hits, 0) << k.name;
      if (k.expect_preemption) {
        EXPECT_GT(r.stats.num_preemptions, 0) << k.name;
      }
      std::printf("[ info ] %s, %s: %lld of %lld prompt tokens hit, %lld preemptions\n",
                  dtype.c_str(), k.name.c_str(), static_cast<long long>(r.stats.prefix_cache_hits),
                  static_cast<long long>(r.stats.prefix_cache_queries),
                  static_cast<long long>(r.stats.num_preemptions));
    }
  }
}

TEST(PrefixCacheIdentityTest, Stories260K) {
  const std::string model = kShared + "/models/stories260K";
  if (!fs::exists(model + "/model.safetensors")) GTEST_SKIP() << "shared assets absent";
  CheckPrefixCachingIdentity(model);
}

TEST(PrefixCacheIdentityTest, RandomGqaModel) {
  if (!fs::exists(kShared + "/models/stories260K/tokenizer.model"))
    GTEST_SKIP() << "shared assets absent (the random model borrows tok512)";
  const std::string dir = GenerateRandomTok512Model(
      "pagellm_prefix_identity_gqa",
      "--layers 2 --hidden 128 --heads 8 --kv-heads 2 --head-dim 16 --intermediate 256", 5);
  if (dir.empty()) GTEST_SKIP() << "model generator unavailable";
  CheckPrefixCachingIdentity(dir);
}

}  // namespace
}  // namespace pagellm
