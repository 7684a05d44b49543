#include "python/py_llm.h"

#include "engine/sampling_params_json.h"
#include "pybind11/stl.h"
#include "python/py_convert.h"
#include "python/py_engine_config.h"

namespace py = pybind11;

namespace pagellm::python {

void ThrowStatus(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kResourceExhausted:
      throw py::value_error(st.message());
    case StatusCode::kNotFound:
      PyErr_SetString(PyExc_FileNotFoundError, st.message().c_str());
      throw py::error_already_set();
    case StatusCode::kUnimplemented:
      PyErr_SetString(PyExc_NotImplementedError, st.message().c_str());
      throw py::error_already_set();
    default:
      throw std::runtime_error(st.message());
  }
}

py::dict StatsToDict(const EngineStats& s) {
  py::dict d;
  d["num_running"] = s.num_running;
  d["num_waiting"] = s.num_waiting;
  d["num_swapped"] = s.num_swapped;
  d["num_preemptions"] = s.num_preemptions;
  d["kv_usage"] = s.kv_usage;
  d["num_free_blocks"] = s.num_free_blocks;
  d["num_usable_blocks"] = s.num_usable_blocks;
  d["num_steps"] = s.num_steps;
  d["prefix_cache_queries"] = s.prefix_cache_queries;
  d["prefix_cache_hits"] = s.prefix_cache_hits;
  // Tensor parallelism: rank 0's forward steps, their time and, of it, inside collectives.
  d["tensor_parallel_size"] = s.tensor_parallel_size;
  d["tp_forward_steps"] = s.tp_forward_steps;
  d["tp_forward_seconds"] = s.tp_forward_seconds;
  d["tp_comm_seconds"] = s.tp_comm_seconds;
  d["tp_all_reduces"] = s.tp_all_reduces;
  d["tp_all_reduce_seconds"] = s.tp_all_reduce_seconds;
  return d;
}

std::unique_ptr<TensorParallelThreads> StartTensorParallelThreads(EngineConfig& config) {
  if (config.tensor_parallel_size <= 1) return nullptr;
  auto tp = std::make_unique<TensorParallelThreads>(config.tensor_parallel_size);
  config.tensor_parallel_group = tp->rank0();
  return tp;
}

void StopAfterFailedStart(std::unique_ptr<TensorParallelThreads> tp) {
  if (tp == nullptr) return;
  py::gil_scoped_release release;
  (void)tp->Stop();
}

void ThrowIfGroupFailed(const TensorParallelThreads* tp) {
  if (tp == nullptr) return;
  const Status failure = tp->failure();
  if (!failure.ok())
    throw std::runtime_error("the tensor-parallel group has failed: " + failure.message());
}

PyLLM::PyLLM(const py::dict& engine_args) {
  EngineConfig config = EngineConfigFromDict(engine_args);
  std::unique_ptr<TensorParallelThreads> tp = StartTensorParallelThreads(config);
  StatusOr<std::unique_ptr<LLM>> llm = [&] {
    py::gil_scoped_release release;
    return LLM::Create(config);
  }();
  if (!llm.ok()) {
    StopAfterFailedStart(std::move(tp));
    ThrowStatus(llm.status());
  }
  tp_ = std::move(tp);
  llm_ = std::move(*llm);
}

PyLLM::~PyLLM() {
  Shutdown();
}

void PyLLM::Shutdown() {
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  shut_down_ = true;
  if (tp_ != nullptr) (void)tp_->Stop();
}

py::list PyLLM::Generate(const py::list& prompts, const py::list& params,
                         const py::list& priorities, const py::object& on_progress) {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock())
    throw std::runtime_error("this LLM is already generating in another thread");
  if (shut_down_) throw std::runtime_error("this LLM has been shut down");
  ThrowIfGroupFailed(tp_.get());
  std::vector<PromptInput> inputs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    py::handle p = prompts[i];
    if (py::isinstance<py::str>(p)) {
      inputs[i].text = p.cast<std::string>();  // UnicodeEncodeError for lone surrogates
    } else {
      inputs[i].token_ids = p.cast<std::vector<int32_t>>();
    }
    if (!priorities.empty()) inputs[i].priority = priorities[i].cast<int>();
  }
  std::vector<SamplingParams> sp;
  std::vector<std::vector<std::string>> stops;
  for (py::handle h : params) {
    sp.push_back(ToSamplingParams(h));
    stops.push_back(sp.back().stop);
  }

  const bool report = !on_progress.is_none();
  int64_t reported = 0;
  bool interrupted = false;
  auto hook = [&](const GenerateProgress& p) -> Status {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
      interrupted = true;  // KeyboardInterrupt (or the handler's exception) is now pending
      return UnavailableError("interrupted");
    }
    if (report && p.prompts_finished != reported) {
      reported = p.prompts_finished;
      try {
        on_progress(p.prompts_finished, p.prompt_tokens, p.output_tokens);
      } catch (py::error_already_set& e) {
        e.restore();
        interrupted = true;
        return UnavailableError("progress callback raised");
      }
    }
    return Status::Ok();
  };
  StatusOr<std::vector<RequestOutput>> results = [&] {
    py::gil_scoped_release release;
    return llm_->Generate(inputs, sp, hook);
  }();
  if (interrupted) throw py::error_already_set();
  if (!results.ok()) {
    ThrowIfGroupFailed(tp_.get());  // a worker's failure, rather than its echo on rank 0
    ThrowStatus(results.status());
  }
  const Tokenizer& tok = llm_->core().tokenizer();
  py::list out(results->size());
  for (size_t i = 0; i < results->size(); ++i) {
    const size_t k = sp.size() == 1 ? 0 : i;
    out[i] = RequestOutputToPython((*results)[i], sp[k].logprobs.has_value(), tok, stops[k]);
  }
  return out;
}

py::list PyLLM::Tokenize(const std::string& text) const {
  return py::cast(llm_->Tokenize(text));
}

void PyLLM::Validate(const py::handle& params) const {
  const SamplingParams p = ToSamplingParams(params);
  const EngineCore& core = llm_->core();
  Status st = p.Validate(core.model_config().vocab_size, core.config().max_logprobs);
  if (!st.ok()) ThrowStatus(st);
}

py::dict PyLLM::Stats() const {
  EngineStats stats;
  {
    // Waits for a running Generate's step without holding the GIL that its hook takes.
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu_);
    stats = llm_->core().stats();
  }
  return StatsToDict(stats);
}

py::dict PyLLM::Info() const {
  return EngineInfo(llm_->core());
}

py::dict EngineInfo(const EngineCore& core) {
  py::dict d;
  d["model"] = core.config().model;
  d["vocab_size"] = core.model_config().vocab_size;
  d["max_model_len"] = core.max_model_len();
  d["num_blocks"] = core.kv_report().num_blocks;
  d["block_size"] = core.config().block_size;
  d["max_logprobs"] = core.config().max_logprobs;
  // The model's generation_config.json over vLLM's sampling defaults (SamplingParams kwargs).
  const SamplingParams defaults = DefaultSamplingParams(core.model());
  py::dict sampling;
  sampling["temperature"] = defaults.temperature;
  sampling["top_p"] = defaults.top_p;
  sampling["top_k"] = defaults.top_k;
  sampling["min_p"] = defaults.min_p;
  sampling["repetition_penalty"] = defaults.repetition_penalty;
  d["default_sampling"] = sampling;
  return d;
}

bool PyLLM::ResetPrefixCache() {
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return false;
  return llm_->core().ResetPrefixCache();
}

}  // namespace pagellm::python
