// The engine's batch-invariance workload under tensor and pipeline parallelism, the ranks as
// threads of this process (dist/local_communicator.h), rank 0 running the engine: mixed prompt
// lengths (BOS-only to 300 tokens) and shared prefixes (prefix caching), a token budget of 64
// (chunked prefill), a KV cache so small that requests are preempted (recompute, and swap), prompt
// logprobs (steps whose sequences want every row), and speculative decoding with a draft model.
// PP 2 gives the outputs of one rank bit for bit (tokens, logprobs, prompt logprobs); TP 2, TP 4
// (stories260K's 4 KV heads: one per rank) and TP 2 x PP 2 the same tokens (their logits are
// within 1e-5, tensor_parallel_test.cc, so logprobs may differ in the last bits). Every run starts
// from a KV cache poisoned with NaN and ends with every block free.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "backend/tensor_parallel_backend.h"
#include "dist/local_communicator.h"
#include "engine_test_util.h"

namespace pagellm {
namespace {

namespace fs = std::filesystem;
const std::string kShared = PAGELLM_SHARED_DIR;

EngineWorkload MakeWorkload(LLM& llm, int n, uint32_t seed) {
  std::ifstream in(kShared + "/data/tinystories_sample.txt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::mt19937 rng(seed);
  EngineWorkload w;
  const std::vector<int32_t> shared_prefix = llm.Tokenize(text.substr(0, 400));
  for (int i = 0; i < n; ++i) {
    PromptInput p;
    const size_t start = rng() % (text.size() / 2);
    p.token_ids = llm.Tokenize(text.substr(start, 1 + rng() % 1200));
    if (p.token_ids.size() > 300) p.token_ids.resize(300);
    if (i % 4 == 1) {  // the same first ~100 tokens: prefix-cache hits
      std::vector<int32_t> ids = shared_prefix;
      ids.insert(ids.end(), p.token_ids.begin(), p.token_ids.begin() + p.token_ids.size() / 3);
      p.token_ids = ids;
    }
    if (p.token_ids.empty() || i % 7 == 0) p.token_ids.resize(1);  // BOS-only prompts
    SamplingParams sp;
    sp.temperature = 0;
    sp.ignore_eos = true;
    sp.max_tokens = 1 + static_cast<int>(rng() % 32);
    sp.logprobs = 1;
    if (i % 5 == 3) sp.prompt_logprobs = 1;
    w.prompts.push_back(std::move(p));
    w.params.push_back(sp);
  }
  return w;
}

// RunOnPoisonedEngine with the engine on rank 0 of `tp` x `pp` thread ranks.
EngineRun RunSplit(EngineConfig c, int tp, int pp, const EngineWorkload& w) {
  const int ranks = tp * pp;
  auto comms = CreateLocalGroup(ranks, std::chrono::milliseconds(60000));
  std::vector<Status> status(ranks);
  std::vector<std::thread> workers;
  for (int r = 1; r < ranks; ++r)
    workers.emplace_back([&, r] { status[r] = RunTensorParallelWorker(*comms[r]); });
  c.tensor_parallel_size = tp;
  c.pipeline_parallel_size = pp;
  c.tensor_parallel_group = comms[0].get();
  EngineRun run = RunOnPoisonedEngine(c, w);
  EXPECT_TRUE(ShutDownTensorParallelWorkers(*comms[0]).ok());
  for (std::thread& t : workers) t.join();
  for (int r = 1; r < ranks; ++r) EXPECT_TRUE(status[r].ok()) << status[r].ToString();
  return run;
}

void ExpectSameTokens(const EngineRun& want, const EngineRun& got, const std::string& what) {
  ASSERT_EQ(want.outputs.size(), got.outputs.size()) << what;
  for (size_t i = 0; i < want.outputs.size(); ++i)
    ASSERT_EQ(want.outputs[i].outputs.at(0).token_ids, got.outputs[i].outputs.at(0).token_ids)
        << what << ": request " << i;
}

TEST(PipelineParallelEngine, WorkloadMatchesOneRank) {
  const std::string model = kShared + "/models/stories260K";
  const std::string draft = kShared + "/models/llama2xs-279K";
  if (!fs::exists(model + "/model.safetensors") || !fs::exists(draft + "/model.safetensors"))
    GTEST_SKIP() << "shared assets absent";
  EngineConfig base;
  base.model = model;
  base.threads = 1;
  base.max_model_len = 512;
  base.num_gpu_blocks_override = 1024;
  base.scheduler.max_num_seqs = 16;
  base.scheduler.max_num_batched_tokens = 64;
  auto probe = LLM::Create(base);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  const EngineWorkload w = MakeWorkload(**probe, 24, 5);
  probe->reset();

  std::vector<std::pair<std::string, EngineConfig>> configs;
  configs.emplace_back("chunked prefill, prefix caching", base);
  for (PreemptionMode mode : {PreemptionMode::kRecompute, PreemptionMode::kSwap}) {
    EngineConfig c = base;
    c.num_gpu_blocks_override = 40;  // 640 tokens for 16 running requests of up to ~330
    c.scheduler.preemption_mode = mode;
    c.swap_space_gib = 0.001;
    configs.emplace_back("preemption " + std::string(PreemptionModeName(mode)), c);
  }
  EngineConfig spec = base;
  spec.speculative.method = SpeculativeMethod::kDraftModel;
  spec.speculative.model = draft;
  spec.speculative.num_speculative_tokens = 3;
  spec.speculative.draft_policy = "fixed";
  configs.emplace_back("speculative decoding", spec);

  for (const auto& [name, c] : configs) {
    SCOPED_TRACE(name);
    const EngineRun ref = RunOnPoisonedEngine(c, w);
    ASSERT_EQ(ref.outputs.size(), w.prompts.size());
    if (name.rfind("preemption", 0) == 0) {
      EXPECT_GT(ref.stats.num_preemptions, 0) << "the KV budget was meant to force preemption";
    }
    const EngineRun pp2 = RunSplit(c, 1, 2, w);
    ExpectIdenticalOutputs(ref, pp2, name + " at PP 2");
    EXPECT_EQ(pp2.stats.num_preemptions, ref.stats.num_preemptions);
    ExpectSameTokens(ref, RunSplit(c, 2, 1, w), name + " at TP 2");
    ExpectSameTokens(ref, RunSplit(c, 4, 1, w), name + " at TP 4");
    ExpectSameTokens(ref, RunSplit(c, 2, 2, w), name + " at TP 2 x PP 2");
  }
}

}  // namespace
}  // namespace pagellm
