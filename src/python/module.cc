// pagellm._pagellm: the C++ engine for the Python package (python/pagellm). The Python side
// gives vLLM's classes and argument handling; this module loads models, runs the engine with
// the GIL released, and converts results to plain tuples.
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "python/py_async_engine.h"
#include "python/py_llm.h"
#include "python/py_tokenizer.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace py = pybind11;
using pagellm::python::PyAsyncEngine;
using pagellm::python::PyLLM;
using pagellm::python::PyTokenizer;

PYBIND11_MODULE(_pagellm, m) {
  m.doc() = "pagellm's C++ engine (use the pagellm package, not this module)";
  m.attr("__version__") = PAGELLM_VERSION;
  // The engine's log lines (model loading, KV sizing) go to stderr, as Python's own logging
  // does, so that a program's printed results stay alone on stdout.
  spdlog::set_default_logger(spdlog::stderr_color_mt("pagellm"));

  py::class_<PyLLM, std::shared_ptr<PyLLM>>(m, "Engine")
      .def(py::init<const py::dict&>(), py::arg("engine_args"))
      .def("generate", &PyLLM::Generate, py::arg("prompts"), py::arg("params"),
           py::arg("priorities"), py::arg("on_progress"))
      .def("tokenize", &PyLLM::Tokenize, py::arg("text"))
      .def("validate", &PyLLM::Validate, py::arg("params"))
      .def("stats", &PyLLM::Stats)
      .def("info", &PyLLM::Info)
      .def("reset_prefix_cache", &PyLLM::ResetPrefixCache)
      .def("shutdown", &PyLLM::Shutdown)
      .def("tokenizer", [](const std::shared_ptr<PyLLM>& self) {
        return std::make_shared<PyTokenizer>(self, &self->core().tokenizer());
      });

  py::class_<PyAsyncEngine, std::shared_ptr<PyAsyncEngine>>(m, "AsyncEngine")
      .def(py::init<const py::dict&>(), py::arg("engine_args"))
      .def("add_request", &PyAsyncEngine::AddRequest, py::arg("request_id"),
           py::arg("prompt_token_ids"), py::arg("params"), py::arg("priority"))
      .def("abort", &PyAsyncEngine::Abort, py::arg("request_id"))
      .def("take_outputs", &PyAsyncEngine::TakeOutputs)
      .def("notify_fd", &PyAsyncEngine::notify_fd)
      .def("shutdown", &PyAsyncEngine::Shutdown)
      .def("tokenize", &PyAsyncEngine::Tokenize, py::arg("text"))
      .def("stats", &PyAsyncEngine::Stats)
      .def("info", &PyAsyncEngine::Info)
      .def("tokenizer", [](const std::shared_ptr<PyAsyncEngine>& self) {
        return std::make_shared<PyTokenizer>(self, &self->core().tokenizer());
      });

  py::class_<PyTokenizer, std::shared_ptr<PyTokenizer>>(m, "Tokenizer")
      .def_static("load", &PyTokenizer::Load, py::arg("path"))
      .def("encode", &PyTokenizer::Encode, py::arg("text"), py::arg("add_special_tokens"))
      .def("decode", &PyTokenizer::Decode, py::arg("token_ids"), py::arg("skip_special_tokens"))
      .def("ids_to_pieces", &PyTokenizer::IdsToPieces, py::arg("token_ids"))
      .def("piece_to_id", &PyTokenizer::PieceToId, py::arg("piece"))
      .def("apply_chat_template", &PyTokenizer::ApplyChatTemplate, py::arg("messages_json"),
           py::arg("options_json"), py::arg("template_source"))
      .def_property_readonly("vocab_size",
                             [](const PyTokenizer& t) { return t.tokenizer().vocab_size(); })
      .def_property_readonly("bos_token_id",
                             [](const PyTokenizer& t) { return t.tokenizer().bos_id(); })
      .def_property_readonly("eos_token_id",
                             [](const PyTokenizer& t) { return t.tokenizer().eos_id(); })
      .def_property_readonly("bos_token",
                             [](const PyTokenizer& t) { return t.tokenizer().bos_token(); })
      .def_property_readonly("eos_token",
                             [](const PyTokenizer& t) { return t.tokenizer().eos_token(); })
      .def_property_readonly("chat_template",
                             [](const PyTokenizer& t) { return t.tokenizer().chat_template(); })
      .def_property_readonly("add_bos_token",
                             [](const PyTokenizer& t) { return t.tokenizer().add_bos(); });
}
