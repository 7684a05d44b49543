// Shared pieces of the cross-module engine suites (batch invariance, prefix-cache identity,
// speculative-decoding identity): run a workload through a fresh engine whose KV cache is
// poisoned with NaN, check that every KV block came back, and compare two runs bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/llm.h"

namespace pagellm {

struct EngineWorkload {
  std::vector<PromptInput> prompts;
  std::vector<SamplingParams> params;
};

struct EngineRun {
  std::vector<RequestOutput> outputs;
  EngineStats stats;  // taken after the last request finished
};

// Creates an engine for `config`, fills its whole KV cache with NaN (a read of a slot that was
// never written then shows in the outputs), runs the workload either all at once or one request
// at a time, and expects the engine to end idle with every KV block free.
inline EngineRun RunOnPoisonedEngine(const EngineConfig& config, const EngineWorkload& w,
                                     bool one_at_a_time = false) {
  EngineRun r;
  auto llm = LLM::Create(config);
  EXPECT_TRUE(llm.ok()) << llm.status().ToString();
  if (!llm.ok()) return r;
  (*llm)->core().PoisonKvCache();
  if (one_at_a_time) {
    for (size_t i = 0; i < w.prompts.size(); ++i) {
      auto out = (*llm)->Generate({w.prompts[i]}, {w.params[i]});
      EXPECT_TRUE(out.ok()) << out.status().ToString();
      if (out.ok()) r.outputs.push_back((*out)[0]);
    }
  } else {
    auto out = (*llm)->Generate(w.prompts, w.params);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (out.ok()) r.outputs = std::move(*out);
  }
  r.stats = (*llm)->core().stats();
  EXPECT_EQ(r.stats.num_free_blocks, r.stats.num_usable_blocks) << "KV blocks leaked";
  EXPECT_EQ(r.stats.num_running + r.stats.num_waiting + r.stats.num_swapped, 0);
  return r;
}

// Token ids, text, finish and stop reasons, sampled logprobs (value and top list) and prompt
// logprobs must all be identical; logprobs are compared bitwise because identical logits give
// identical floats.
inline void ExpectIdenticalOutputs(const EngineRun& want, const EngineRun& got,
                                   const std::string& what) {
  ASSERT_EQ(want.outputs.size(), got.outputs.size()) << what;
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    const CompletionOutput& a = want.outputs[i].outputs.at(0);
    const CompletionOutput& b = got.outputs[i].outputs.at(0);
    ASSERT_EQ(a.token_ids, b.token_ids) << what << ": request " << i;
    ASSERT_EQ(a.text, b.text) << what << ": request " << i;
    ASSERT_EQ(a.finish_reason, b.finish_reason) << what << ": request " << i;
    ASSERT_EQ(a.stop_reason, b.stop_reason) << what << ": request " << i;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what << ": request " << i;
    for (size_t t = 0; t < a.logprobs.size(); ++t) {
      ASSERT_EQ(a.logprobs[t].logprob, b.logprobs[t].logprob) << what << ": request " << i;
      ASSERT_EQ(a.logprobs[t].top, b.logprobs[t].top) << what << ": request " << i;
    }
    const auto& pa = want.outputs[i].prompt_logprobs;
    const auto& pb = got.outputs[i].prompt_logprobs;
    ASSERT_EQ(pa.size(), pb.size()) << what << ": request " << i;
    for (size_t t = 0; t < pa.size(); ++t) {
      ASSERT_EQ(pa[t].has_value(), pb[t].has_value()) << what << ": request " << i;
      if (pa[t]) {
        ASSERT_EQ(pa[t]->logprob, pb[t]->logprob) << what << ": request " << i << ", prompt "
                                                  << "token " << t;
      }
    }
  }
}

// Writes a random-weight Llama model with the tok512 tokenizer of ../shared (tools/gen_model.py)
// to the temporary directory `name`; `shape_args` are gen_model.py flags such as
// "--layers 2 --hidden 128 --heads 8 --kv-heads 2 --head-dim 16 --intermediate 256".
// Returns the directory, or "" when the generator could not run (the caller skips).
inline std::string GenerateRandomTok512Model(const std::string& name, const std::string& shape_args,
                                             int seed) {
  const std::string shared = PAGELLM_SHARED_DIR;
  const std::string dir = std::filesystem::temp_directory_path() / name;
  const std::string cmd = std::string("/usr/bin/python3 ") + PAGELLM_SOURCE_DIR +
                          "/tools/gen_model.py --preset tiny " + shape_args +
                          " --vocab 512 --tokenizer tok512 --max-pos 1024 --quiet --seed " +
                          std::to_string(seed) + " --out " + dir + " --shared-dir " + shared;
  if (std::system(cmd.c_str()) != 0) return "";
  return dir;
}

}  // namespace pagellm
