// The serving guarantees for every model family beyond the Llama-style dense ones (Qwen3, the
// mixtures of experts Mixtral, Qwen2-MoE, Qwen3-MoE, and Gemma 2 / Gemma 3 with prompts longer
// than their sliding windows), on random-weight models of each
// written by tools/gen_model.py in Hugging Face (F32 safetensors) and GGUF (Q8_0: stacked,
// quantized experts) layout:
//   - batch invariance: 24 requests give token-for-token identical outputs and bitwise
//     identical logprobs one at a time and batched, with block size 7 and small prefill
//     chunks, and under swap preemption (for a MoE: a token's experts and their sum do not
//     depend on which tokens share its step);
//   - prefix caching on and off give identical outputs, with hits;
//   - every run ends with every KV block free (RunOnPoisonedEngine) on a NaN-poisoned cache.
// Logits against the float64 reference are tests/test_reference_logits.py's.
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

struct Family {
  const char* name;
  const char* shape;  // gen_model.py flags
};

const Family kFamilies[] = {
    {"qwen3",
     "--arch qwen3 --layers 2 --hidden 128 --heads 4 --kv-heads 2 --head-dim 64 "
     "--intermediate 256"},
    {"mixtral",
     "--arch mixtral --layers 2 --hidden 128 --heads 4 --kv-heads 2 --head-dim 32 "
     "--intermediate 96 --experts 4 --experts-per-tok 2 --untied"},
    {"qwen2moe",
     "--arch qwen2moe --layers 2 --hidden 128 --heads 4 --kv-heads 2 --head-dim 32 "
     "--intermediate 256 --experts 8 --experts-per-tok 2 --moe-intermediate 64 "
     "--shared-intermediate 128 --no-norm-topk-prob"},
    {"qwen3moe",
     "--arch qwen3moe --layers 2 --hidden 128 --heads 4 --kv-heads 2 --head-dim 32 "
     "--intermediate 256 --experts 8 --experts-per-tok 3 --moe-intermediate 64 "
     "--norm-topk-prob"},
    // Windows of 16 against prompts of 72..104 tokens: the local layers' masks bite.
    {"gemma3",
     "--arch gemma3 --layers 6 --hidden 128 --heads 4 --kv-heads 2 --head-dim 32 "
     "--intermediate 256 --sliding-window 16"},
    {"gemma2",
     "--arch gemma2 --layers 4 --hidden 128 --heads 4 --kv-heads 2 --head-dim 32 "
     "--intermediate 256 --sliding-window 16 --attn-softcap 5 --final-softcap 10"},
};

void PrintTo(const Family& f, std::ostream* os) {
  *os << f.name;
}

// Writes the family's model as an HF directory and a Q8_0 GGUF; returns {dir, gguf}, or empty
// strings when the generator cannot run.
std::pair<std::string, std::string> Generate(const Family& f) {
  const fs::path root = fs::temp_directory_path() / (std::string("pagellm_family_") + f.name);
  const std::string dir = root / "hf", gguf = root / "model-q8_0.gguf";
  const std::string cmd =
      std::string("/usr/bin/python3 ") + PAGELLM_SOURCE_DIR + "/tools/gen_model.py --preset tiny " +
      f.shape + " --vocab 512 --tokenizer tok512 --max-pos 1024 --quiet --seed 17 --out " + dir +
      " --gguf " + gguf + " --gguf-type q8_0 --shared-dir " + kShared;
  if (std::system(cmd.c_str()) != 0) return {"", ""};
  return {dir, gguf};
}

// 24 requests: 4 prefixes of 64 tokens, each followed by 8..40 tokens of its own; outputs
// 1..20 tokens, some with prompt logprobs.
EngineWorkload MakeWorkload(LLM& llm) {
  std::ifstream in(kShared + "/data/tinystories_sample.txt");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::mt19937 rng(23);
  const int vocab = llm.core().model_config().vocab_size;
  auto slice = [&](size_t len) {
    const size_t start = rng() % (text.size() - 8 * len);
    std::vector<int32_t> ids = llm.Tokenize(text.substr(start, 8 * len));
    if (ids.size() > len) ids.resize(len);
    for (auto& id : ids) id = std::min(id, vocab - 1);
    return ids;
  };
  std::vector<std::vector<int32_t>> prefixes;
  for (int g = 0; g < 4; ++g) prefixes.push_back(slice(64));
  EngineWorkload w;
  for (int i = 0; i < 24; ++i) {
    PromptInput p;
    p.token_ids = prefixes[i % 4];
    const std::vector<int32_t> own = slice(8 + rng() % 33);
    p.token_ids.insert(p.token_ids.end(), own.begin(), own.end());
    SamplingParams sp;
    sp.temperature = 0;
    sp.ignore_eos = true;
    sp.max_tokens = 1 + static_cast<int>(rng() % 20);
    sp.logprobs = 2;
    if (i % 7 == 3) sp.prompt_logprobs = 1;
    w.prompts.push_back(std::move(p));
    w.params.push_back(sp);
  }
  return w;
}

void CheckFamily(const std::string& model) {
  SCOPED_TRACE(model);
  EngineConfig base;
  base.model = model;
  base.max_model_len = 512;
  base.num_gpu_blocks_override = 1024;
  base.scheduler.max_num_seqs = 24;
  base.scheduler.max_num_batched_tokens = 512;
  auto probe = LLM::Create(base);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  const EngineWorkload w = MakeWorkload(**probe);
  // A sliding-window model's pool block holds one KV cache group's layers
  // (kv/kv_cache_groups.h): the block counts below are in whole-model blocks.
  const int groups =
      std::max<int>(1, static_cast<int>((*probe)->core().kv_report().kv_group_windows.size()));
  base.num_gpu_blocks_override = 1024 * groups;
  probe->reset();

  EngineConfig serial = base;
  serial.scheduler.max_num_seqs = 1;
  serial.enable_prefix_caching = false;
  const EngineRun ref = RunOnPoisonedEngine(serial, w, /*one_at_a_time=*/true);
  ASSERT_EQ(ref.outputs.size(), w.prompts.size());

  EngineConfig no_cache = base;
  no_cache.enable_prefix_caching = false;
  ExpectIdenticalOutputs(ref, RunOnPoisonedEngine(no_cache, w), "batched, no prefix caching");
  const EngineRun cached = RunOnPoisonedEngine(base, w);
  ExpectIdenticalOutputs(ref, cached, "batched, prefix caching");
  EXPECT_GT(cached.stats.prefix_cache_hits, 0);
  EngineConfig chunked = base;
  chunked.block_size = 7;
  chunked.scheduler.max_num_batched_tokens = 24;
  ExpectIdenticalOutputs(ref, RunOnPoisonedEngine(chunked, w), "block size 7, chunks of 24");
  EngineConfig swap = base;
  swap.max_model_len = 256;
  // 384 tokens for 24 requests of up to ~125. Sliding-window models hold little besides their
  // global layers, so their pool is just above one request's worst step (all groups holding
  // the whole of a ~125-token prefill: 8 blocks each).
  swap.num_gpu_blocks_override = groups > 1 ? 9 * groups : 24;
  swap.scheduler.preemption_mode = PreemptionMode::kSwap;
  swap.swap_space_gib = 0.001;
  const EngineRun swapped = RunOnPoisonedEngine(swap, w);
  ExpectIdenticalOutputs(ref, swapped, "swap preemption");
  EXPECT_GT(swapped.stats.num_preemptions, 0) << "the KV budget was meant to force preemption";
}

class ModelFamiliesTest : public ::testing::TestWithParam<Family> {};

TEST_P(ModelFamiliesTest, BatchInvariantPrefixCacheExactNoLeaks) {
  if (!fs::exists(kShared + "/models/stories260K/tokenizer.model"))
    GTEST_SKIP() << "shared assets absent (the random models borrow tok512)";
  const auto [dir, gguf] = Generate(GetParam());
  if (dir.empty()) GTEST_SKIP() << "model generator unavailable";
  CheckFamily(dir);
  CheckFamily(gguf);
}

INSTANTIATE_TEST_SUITE_P(Families, ModelFamiliesTest, ::testing::ValuesIn(kFamilies),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace pagellm
