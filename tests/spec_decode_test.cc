// Speculative decoding in the engine: at temperature 0, output with drafts (draft model or
// n-gram, k = 1..8) is token-for-token identical to output without them (same logprobs,
// text, finish reasons, prompt logprobs), with chunked prefill on a small token budget, prefix
// caching over shared prompts, and preemption forced by a tiny KV cache (recompute and swap).
// The KV caches (target and draft) are poisoned with NaN first and every run must end with
// every block free. Seeded random sampling with drafts is reproducible run to run, and a draft
// with another tokenizer is refused at start-up.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/llm.h"
#include "engine_test_util.h"
#include "spec/speculative_config_parser.h"

namespace pagellm {
namespace {

namespace fs = std::filesystem;
const std::string kShared = PAGELLM_SHARED_DIR;
const std::string kTarget = kShared + "/models/stories260K";
const std::string kDraft = kShared + "/models/llama2xs-279K";

bool HaveSharedModels() {
  return fs::exists(kTarget + "/model.safetensors") && fs::exists(kDraft + "/model.safetensors");
}

// TinyStories slices (some repeated whole, some sharing a long prefix, some BOS only), outputs
// of 1..40 tokens; some requests stop on a token or a string, one wants prompt logprobs.
EngineWorkload MakeWorkload(LLM& llm, int n, uint32_t seed, double temperature) {
  std::ifstream in(kShared + "/data/tinystories_sample.txt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::mt19937 rng(seed);
  EngineWorkload w;
  const int vocab = llm.core().model_config().vocab_size;
  const std::optional<int32_t> period = llm.core().tokenizer().PieceToId(".");
  for (int i = 0; i < n; ++i) {
    PromptInput p;
    if (i % 5 == 4 && !w.prompts.empty()) {
      p.token_ids = w.prompts[i - 1].token_ids;  // same prompt again: prefix-cache hits
      p.token_ids.push_back(1 + i);
    } else if (!text.empty()) {
      const size_t start = rng() % (text.size() / 2);
      p.token_ids = llm.Tokenize(text.substr(start, 1 + rng() % 700));
      if (p.token_ids.size() > 160) p.token_ids.resize(160);
    }
    if (p.token_ids.empty() || i % 7 == 0) p.token_ids = {1};
    for (auto& id : p.token_ids) id = std::min(id, vocab - 1);
    SamplingParams sp;
    sp.temperature = temperature;
    sp.seed = 1000 + i;
    sp.ignore_eos = i % 2 == 0;
    sp.max_tokens = 1 + static_cast<int>(rng() % 40);
    sp.logprobs = i % 3 == 0 ? 2 : 0;
    if (i % 4 == 1 && period.has_value()) sp.stop_token_ids = {*period};
    if (i % 6 == 2) sp.stop = {"Lily"};
    if (i == 3) sp.prompt_logprobs = 1;
    w.prompts.push_back(std::move(p));
    w.params.push_back(sp);
  }
  return w;
}

EngineConfig BaseConfig(const std::string& model) {
  EngineConfig c;
  c.model = model;
  c.threads = 2;
  c.max_model_len = 256;
  c.num_gpu_blocks_override = 1024;
  c.scheduler.max_num_seqs = 16;
  c.scheduler.max_num_batched_tokens = 256;
  return c;
}

SpeculativeConfig DraftSpec(const std::string& draft, int k) {
  SpeculativeConfig s;
  s.method = SpeculativeMethod::kDraftModel;
  s.model = draft;
  s.num_speculative_tokens = k;
  s.draft_policy = "fixed";  // every request drafts k: the most verification work
  return s;
}

SpeculativeConfig NgramSpec(int k) {
  SpeculativeConfig s;
  s.method = SpeculativeMethod::kNgram;
  s.num_speculative_tokens = k;
  s.prompt_lookup_min = 1;
  s.prompt_lookup_max = 3;
  s.draft_policy = "fixed";
  return s;
}

// Greedy identity over k = 1..8 with the default engine, then chunked prefill on a 16-token
// budget, and preemption (recompute, swap) on a cache of a few blocks, at k = 3 and 8.
void CheckGreedyIdentity(const std::string& target, const SpeculativeConfig& spec_template,
                         const std::string& name) {
  const EngineConfig base = BaseConfig(target);
  const bool self_draft = spec_template.model == target;
  auto probe = LLM::Create(base);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  const EngineWorkload w = MakeWorkload(**probe, 24, 11, 0.0);
  probe->reset();
  const EngineRun ref = RunOnPoisonedEngine(base, w);
  ASSERT_EQ(ref.outputs.size(), w.prompts.size());

  int64_t accepted = 0;
  for (int k = 1; k <= 8; ++k) {
    EngineConfig c = base;
    c.speculative = spec_template;
    c.speculative.num_speculative_tokens = k;
    const EngineRun r = RunOnPoisonedEngine(c, w);
    ExpectIdenticalOutputs(ref, r, name + " k=" + std::to_string(k));
    EXPECT_GT(r.stats.spec_decode.num_drafts, 0) << name << " k=" << k;
    EXPECT_LE(r.stats.spec_decode.num_accepted_tokens, r.stats.spec_decode.num_draft_tokens);
    EXPECT_LE(r.stats.spec_decode.num_draft_tokens, r.stats.spec_decode.num_drafts * k);
    accepted += r.stats.spec_decode.num_accepted_tokens;
    if (self_draft) {
      // A model drafting for itself computes the same logits (batch invariance): all accepted.
      EXPECT_EQ(r.stats.spec_decode.num_accepted_tokens, r.stats.spec_decode.num_draft_tokens)
          << name << " k=" << k;
    }
    std::printf("[ info ] %s k=%d: %lld drafts, acceptance %.3f, mean acceptance length %.2f\n",
                name.c_str(), k, static_cast<long long>(r.stats.spec_decode.num_drafts),
                r.stats.spec_decode.AcceptanceRate(), r.stats.spec_decode.MeanAcceptanceLength());
  }
  EXPECT_GT(accepted, 0) << name << ": no draft was ever accepted";
  // The adaptive policy (the default) drafts fewer tokens per request and step, never other
  // output.
  for (int k : {4, 8}) {
    EngineConfig c = base;
    c.speculative = spec_template;
    c.speculative.num_speculative_tokens = k;
    c.speculative.draft_policy = "adaptive";
    const EngineRun r = RunOnPoisonedEngine(c, w);
    ExpectIdenticalOutputs(ref, r, name + " adaptive k=" + std::to_string(k));
    EXPECT_LE(r.stats.spec_decode.num_draft_tokens, r.stats.spec_decode.num_drafts * k);
    if (self_draft) {
      EXPECT_EQ(r.stats.spec_decode.num_accepted_tokens, r.stats.spec_decode.num_draft_tokens);
    }
    std::printf("[ info ] %s adaptive k=%d: %lld drafts, %lld draft tokens, acceptance %.3f\n",
                name.c_str(), k, static_cast<long long>(r.stats.spec_decode.num_drafts),
                static_cast<long long>(r.stats.spec_decode.num_draft_tokens),
                r.stats.spec_decode.AcceptanceRate());
  }

  for (int k : {3, 8}) {
    EngineConfig c = base;
    c.speculative = spec_template;
    c.speculative.num_speculative_tokens = k;
    c.scheduler.max_num_batched_tokens = 16;
    c.scheduler.long_prefill_token_threshold = 8;
    const EngineRun chunked = RunOnPoisonedEngine(c, w);
    ExpectIdenticalOutputs(ref, chunked, name + " chunked prefill k=" + std::to_string(k));
    // With itself as draft, any draft KV gone stale (rollback, prefix hits, preemption, swap)
    // would show as a rejected draft.
    if (self_draft) {
      EXPECT_EQ(chunked.stats.spec_decode.num_accepted_tokens,
                chunked.stats.spec_decode.num_draft_tokens);
    }
    for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
      EngineConfig p = base;
      p.speculative = spec_template;
      p.speculative.num_speculative_tokens = k;
      p.block_size = 4;
      p.num_gpu_blocks_override = 64;  // 256 tokens for 24 requests of up to ~210
      p.scheduler.preemption_mode = mode;
      p.swap_space_gib = 0.0005;
      const EngineRun r = RunOnPoisonedEngine(p, w);
      ExpectIdenticalOutputs(ref, r,
                             name + " preemption " + std::string(PreemptionModeName(mode)) +
                                 " k=" + std::to_string(k));
      EXPECT_GT(r.stats.num_preemptions, 0) << "the KV budget was meant to force preemption";
      if (self_draft) {
        EXPECT_EQ(r.stats.spec_decode.num_accepted_tokens, r.stats.spec_decode.num_draft_tokens);
      }
    }
  }
}

TEST(SpecDecodeTest, DraftModelGreedyIdentical) {
  if (!HaveSharedModels()) GTEST_SKIP() << "shared assets absent";
  CheckGreedyIdentity(kTarget, DraftSpec(kDraft, 1), "draft_model");
}

TEST(SpecDecodeTest, NgramGreedyIdentical) {
  if (!HaveSharedModels()) GTEST_SKIP() << "shared assets absent";
  CheckGreedyIdentity(kTarget, NgramSpec(1), "ngram");  // the default rule, vote
  SpeculativeConfig earliest = NgramSpec(1);
  earliest.ngram_rule = "earliest";  // vLLM's rule
  CheckGreedyIdentity(kTarget, earliest, "ngram earliest");
}

// Two random models of the same tokenizer (target and draft differ), GQA, head_dim 16.
TEST(SpecDecodeTest, RandomModelsGreedyIdentical) {
  if (!fs::exists(kShared + "/models/stories260K/tokenizer.model"))
    GTEST_SKIP() << "shared assets absent (the random models borrow tok512)";
  const char* tmp_env = std::getenv("PAGELLM_TMP");
  const fs::path tmp = tmp_env != nullptr ? fs::path(tmp_env) : fs::temp_directory_path();
  std::string dirs[2];
  for (int i = 0; i < 2; ++i) {
    dirs[i] = (tmp / ("pagellm_spec_random_" + std::to_string(i))).string();
    const std::string cmd =
        std::string("/usr/bin/python3 ") + PAGELLM_SOURCE_DIR +
        "/tools/gen_model.py --preset tiny --layers 2 --hidden 64 --heads 4 --kv-heads 2 "
        "--head-dim 16 --intermediate 128 --vocab 512 --tokenizer tok512 --max-pos 512 --quiet "
        "--seed " +
        std::to_string(5 + i) + " --out " + dirs[i] + " --shared-dir " + kShared;
    if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "model generator unavailable: " << cmd;
  }
  // The target as its own draft: every draft accepted (bonus tokens, full lookahead use).
  CheckGreedyIdentity(dirs[0], DraftSpec(dirs[0], 1), "random self-draft");
  // An unrelated draft: nearly every draft rejected.
  CheckGreedyIdentity(dirs[0], DraftSpec(dirs[1], 1), "random draft_model");
  CheckGreedyIdentity(dirs[0], NgramSpec(1), "random ngram");
}

// Seeded random sampling through the rejection sampler: identical across runs (and across
// batch compositions, since every request draws from its own generator).
TEST(SpecDecodeTest, SeededRandomSamplingReproducible) {
  if (!HaveSharedModels()) GTEST_SKIP() << "shared assets absent";
  for (const SpeculativeConfig& spec :
       {DraftSpec(kDraft, 4), NgramSpec(4), DraftSpec(kTarget, 3)}) {
    EngineConfig c = BaseConfig(kTarget);
    c.speculative = spec;
    // The default policy: seeded sampled requests draft k whatever the batch (their draws
    // must not depend on it), so the 3-at-a-time run below still matches.
    c.speculative.draft_policy = "adaptive";
    auto probe = LLM::Create(c);
    ASSERT_TRUE(probe.ok()) << probe.status().ToString();
    EngineWorkload w = MakeWorkload(**probe, 16, 23, 0.8);
    for (SamplingParams& p : w.params) p.top_k = 40;
    probe->reset();
    const EngineRun a = RunOnPoisonedEngine(c, w);
    const EngineRun b = RunOnPoisonedEngine(c, w);
    ExpectIdenticalOutputs(a, b, std::string(SpeculativeMethodName(spec.method)) + " seeded rerun");
    EXPECT_GT(a.stats.spec_decode.num_accepted_tokens, 0) << SpeculativeMethodName(spec.method);
    if (spec.model == kTarget) {
      // Identical draft and target distributions: min(1, p/q) = 1, every draft accepted.
      EXPECT_EQ(a.stats.spec_decode.num_accepted_tokens, a.stats.spec_decode.num_draft_tokens);
    }
    EngineConfig narrow = c;
    narrow.scheduler.max_num_seqs = 3;
    ExpectIdenticalOutputs(
        a, RunOnPoisonedEngine(narrow, w),
        std::string(SpeculativeMethodName(spec.method)) + " seeded, 3 at a time");
  }
}

TEST(SpecDecodeTest, DraftWithAnotherTokenizerIsRefused) {
  const std::string other = kShared + "/models/babyllama-tok105";
  if (!HaveSharedModels() || !fs::exists(other)) GTEST_SKIP() << "shared assets absent";
  EngineConfig c = BaseConfig(kTarget);
  c.speculative = DraftSpec(other, 4);
  auto llm = LLM::Create(c);
  ASSERT_FALSE(llm.ok());
  EXPECT_NE(llm.status().ToString().find("does not share the tokenizer"), std::string::npos)
      << llm.status().ToString();
}

}  // namespace
}  // namespace pagellm
