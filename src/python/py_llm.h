// The offline engine behind pagellm.LLM: engine/llm.h's LLM with the GIL released while it
// steps, Ctrl-C checked between steps (every request of the call is then aborted and its KV
// blocks freed before KeyboardInterrupt propagates), and progress reported to Python.
#pragma once

#include <memory>
#include <mutex>

#include "backend/tensor_parallel_threads.h"
#include "engine/llm.h"
#include "pybind11/pybind11.h"

namespace pagellm::python {

class PyLLM {
 public:
  // Loads the model (GIL released); ValueError / RuntimeError with the engine's message. With
  // tensor_parallel_size N > 1 the ranks run as threads of this process
  // (StartTensorParallelThreads).
  explicit PyLLM(const pybind11::dict& engine_args);
  ~PyLLM();  // Shutdown()

  // Stops the tensor-parallel workers (waiting for a running Generate first); the engine then
  // refuses to generate (RuntimeError), its tokenizer stays usable. Idempotent.
  void Shutdown();

  // prompts: list of str or list[int] (pre-tokenized); params: list of pagellm.SamplingParams,
  // one for all or one per prompt; priorities: list of int (empty = all 0).
  // on_progress(prompts_finished, prompt_tokens, output_tokens) is called after each step in
  // which a prompt finished (None: no callback). Returns RequestOutputToPython tuples in input
  // order.
  pybind11::list Generate(const pybind11::list& prompts, const pybind11::list& params,
                          const pybind11::list& priorities, const pybind11::object& on_progress);

  // Text -> ids as LLM::Tokenize (BOS per the tokenizer config; "" = BOS alone).
  pybind11::list Tokenize(const std::string& text) const;
  // Rejects a SamplingParams this engine would refuse (vocabulary, --max-logprobs).
  void Validate(const pybind11::handle& params) const;

  // EngineStats as a dict (kv_usage, num_running, num_waiting, num_free_blocks, ...).
  pybind11::dict Stats() const;
  pybind11::dict Info() const;  // EngineInfo
  bool ResetPrefixCache();

  const EngineCore& core() const { return llm_->core(); }

 private:
  // Declared before llm_: the workers' group outlives the engine that holds its rank 0.
  std::unique_ptr<TensorParallelThreads> tp_;
  std::unique_ptr<LLM> llm_;
  bool shut_down_ = false;  // guarded by mu_
  // Generate runs without the GIL: a second Python thread must not enter the engine meanwhile.
  mutable std::mutex mu_;
};

// For an engine of tensor_parallel_size N > 1 (`config`), ranks 1..N-1 on threads of this
// process; sets config's group to its rank 0. Null for N = 1.
std::unique_ptr<TensorParallelThreads> StartTensorParallelThreads(EngineConfig& config);
// Stops `tp` (may be null) after its engine failed to start, without the GIL.
void StopAfterFailedStart(std::unique_ptr<TensorParallelThreads> tp);
// RuntimeError for a tensor-parallel engine whose group has failed or been shut down.
void ThrowIfGroupFailed(const TensorParallelThreads* tp);

// {"model", "vocab_size", "max_model_len", "num_blocks", "block_size", "max_logprobs",
//  "default_sampling": {temperature, top_p, top_k, min_p, repetition_penalty}}.
pybind11::dict EngineInfo(const EngineCore& core);
// EngineStats -> dict (shared with the async engine).
pybind11::dict StatsToDict(const EngineStats& stats);
// Throws the Python exception matching a failed Status (ValueError for InvalidArgument /
// OutOfRange, FileNotFoundError for NotFound, RuntimeError otherwise).
[[noreturn]] void ThrowStatus(const Status& status);

}  // namespace pagellm::python
