#include "python/py_async_engine.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "engine/llm.h"
#include "pybind11/stl.h"
#include "python/py_convert.h"
#include "python/py_engine_config.h"
#include "python/py_llm.h"

namespace py = pybind11;

namespace pagellm::python {

PyAsyncEngine::PyAsyncEngine(const py::dict& engine_args) {
  EngineConfig config = EngineConfigFromDict(engine_args);
  std::unique_ptr<TensorParallelThreads> tp = StartTensorParallelThreads(config);
  StatusOr<std::unique_ptr<EngineCore>> core = [&] {
    py::gil_scoped_release release;
    return EngineCore::Create(config);
  }();
  if (!core.ok()) {
    StopAfterFailedStart(std::move(tp));
    ThrowStatus(core.status());
  }
  if (pipe2(pipe_, O_NONBLOCK | O_CLOEXEC) != 0) {
    core->reset();
    StopAfterFailedStart(std::move(tp));
    throw std::runtime_error("cannot create the engine's notification pipe");
  }
  tp_ = std::move(tp);
  engine_ = std::make_unique<AsyncEngine>(std::move(*core));
}

PyAsyncEngine::~PyAsyncEngine() {
  Shutdown();
  for (int fd : pipe_)
    if (fd >= 0) close(fd);
}

void PyAsyncEngine::Shutdown() {
  if (!engine_) return;
  py::gil_scoped_release release;
  engine_->Shutdown();  // joins the loop thread, the one that used the group's rank 0
  if (tp_ != nullptr) (void)tp_->Stop();
}

void PyAsyncEngine::AddRequest(const std::string& request_id,
                               const std::vector<int32_t>& prompt_token_ids,
                               const py::handle& params, int priority) {
  ThrowIfGroupFailed(tp_.get());
  EngineRequest r;
  r.request_id = request_id;
  r.prompt_token_ids = prompt_token_ids;
  r.params = ToSamplingParams(params);
  r.priority = priority;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stops_[request_id] = r.params.stop;
  }
  // Runs on the engine thread: must not block and must not touch Python.
  auto on_output = [this](EngineOutput&& o) {
    bool was_empty;
    {
      std::lock_guard<std::mutex> lock(mu_);
      was_empty = queue_.empty();
      queue_.push_back(std::move(o));
    }
    if (was_empty) {
      const char byte = 1;
      // A full pipe already holds a wake-up: nothing is lost by failing here.
      [[maybe_unused]] ssize_t n = write(pipe_[1], &byte, 1);
    }
  };
  Status st;
  {
    py::gil_scoped_release release;
    st = engine_->Submit(std::move(r), on_output);
  }
  if (!st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    stops_.erase(request_id);
    ThrowStatus(st);
  }
}

void PyAsyncEngine::Abort(const std::string& request_id) {
  engine_->Abort(request_id);
}

py::list PyAsyncEngine::TakeOutputs() {
  char buf[256];
  while (read(pipe_[0], buf, sizeof(buf)) > 0) {
  }
  std::deque<EngineOutput> taken;
  std::unordered_map<std::string, std::vector<std::string>> stops;
  {
    std::lock_guard<std::mutex> lock(mu_);
    taken.swap(queue_);
    for (const EngineOutput& o : taken) {
      auto it = stops_.find(o.request_id);
      if (it == stops_.end()) continue;
      stops[o.request_id] = it->second;
      if (o.finished) stops_.erase(it);
    }
  }
  const Tokenizer& tok = engine_->core().tokenizer();
  py::list out(taken.size());
  for (size_t i = 0; i < taken.size(); ++i)
    out[i] = EngineOutputToPython(taken[i], tok, stops[taken[i].request_id]);
  return out;
}

py::list PyAsyncEngine::Tokenize(const std::string& text) const {
  return py::cast(TokenizePrompt(engine_->core().tokenizer(), text));
}

py::dict PyAsyncEngine::Stats() const {
  return StatsToDict(engine_->stats());
}

py::dict PyAsyncEngine::Info() const {
  return EngineInfo(engine_->core());
}

}  // namespace pagellm::python
