// The engine flags shared by `generate`, `serve` and `bench`, spelled as vLLM spells them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/vllm_compat_flags.h"
#include "engine/engine_config.h"
#include "pagellm/status.h"

namespace pagellm::cli {

struct EngineFlags {
  EngineConfig config;
  std::string scheduling_policy = "fcfs";
  std::string preemption_mode = "recompute";
  std::string kv_cache_memory;  // bytes, or with a unit suffix (e.g. 2GiB)
  std::string kv_cache_dtype = "auto";
  std::string kv_cache_dtype_skip_layers;  // "0,5,..."
  std::string speculative_config;          // --speculative-config JSON
  std::string max_model_len;               // --max-model-len: "4096", "32k", "32K"
  std::string kv_cache_memory_bytes;       // vLLM's --kv-cache-memory-bytes: "2000000", "2G"
  std::string revision;                    // --revision: only a local model, used as it is
  VllmCompatFlags vllm;                    // vLLM flags with no effect here (see its header)

  // Resolves the string-valued flags into `config`, and logs one note per vLLM flag that has no
  // effect here.
  Status Finalize();
};

// Adds --model (unless skip_model), --threads, --max-model-len, --block-size,
// --gpu-memory-utilization, --kv-cache-memory, --num-gpu-blocks-override, --swap-space,
// --max-num-seqs, --max-num-batched-tokens, --enable-chunked-prefill/--no-enable-chunked-prefill,
// --long-prefill-token-threshold, --scheduling-policy, --preemption-mode,
// --enable-prefix-caching/--no-enable-prefix-caching, --speculative-config,
// --speculative-model, --num-speculative-tokens, --speculative-max-model-len, --max-logprobs,
// the vLLM compatibility flags (cli/vllm_compat_flags.h), and the engine
// seed as `seed_flag`
// (`--seed` for serve; `generate` uses --seed for the request and --engine-seed here).
void AddEngineFlags(CLI::App& app, EngineFlags& flags, bool model_required = true,
                    const std::string& seed_flag = "--seed");

// The MPI world this process is rank 0 of when mpirun started it (main.cc sets it; null
// otherwise): Finalize gives it to the engine as its tensor-parallel group.
void SetTensorParallelWorld(Communicator* world);
Communicator* TensorParallelWorld();

// "0,5,7" -> {0, 5, 7} (--kv-cache-dtype-skip-layers); "" -> {}.
StatusOr<std::vector<int>> ParseLayerList(const std::string& text);

// "123", "4096KiB", "2GiB", "1.5GB" -> bytes.
StatusOr<int64_t> ParseByteSize(const std::string& text);

}  // namespace pagellm::cli
