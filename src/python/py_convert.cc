#include "python/py_convert.h"

#include <cmath>
#include <limits>

#include "base/finish_reason.h"
#include "engine/structured_outputs_json.h"
#include "pybind11/stl.h"

namespace py = pybind11;

namespace pagellm::python {
namespace {

// An int attribute that must fit `T` (Python ints are unbounded).
template <typename T>
T IntAttr(py::handle obj, const char* name) {
  py::object v = obj.attr(name);
  if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v))
    throw py::type_error(std::string(name) + " must be an int, got " +
                         std::string(py::str(py::type::of(v))));
  const long long x = v.cast<long long>();  // OverflowError beyond 64 bits
  if (x < static_cast<long long>(std::numeric_limits<T>::min()) ||
      x > static_cast<long long>(std::numeric_limits<T>::max()))
    throw py::value_error(std::string(name) + " is out of range, got " + std::to_string(x) + ".");
  return static_cast<T>(x);
}

float FloatAttr(py::handle obj, const char* name) {
  py::object v = obj.attr(name);
  if (!py::isinstance<py::float_>(v) && !py::isinstance<py::int_>(v))
    throw py::type_error(std::string(name) + " must be a float, got " +
                         std::string(py::str(py::type::of(v))));
  return static_cast<float>(v.cast<double>());
}

template <typename T>
std::optional<T> OptionalIntAttr(py::handle obj, const char* name) {
  if (obj.attr(name).is_none()) return std::nullopt;
  return IntAttr<T>(obj, name);
}

bool BoolAttr(py::handle obj, const char* name) {
  py::object v = obj.attr(name);
  if (!py::isinstance<py::bool_>(v))
    throw py::type_error(std::string(name) + " must be a bool, got " +
                         std::string(py::str(py::type::of(v))));
  return v.cast<bool>();
}

std::string TokenText(const Tokenizer& tok, int32_t id) {
  const int32_t ids[1] = {id};
  return tok.DecodeContinuation(ids, /*skip_special=*/false);
}

py::object FinishReasonOrNone(const std::string& reason) {
  if (reason.empty()) return py::none();
  return py::str(reason);
}

// vLLM's stop_reason: the stop string, the stop token id (an int), or None.
py::object StopReasonOrNone(const std::string& reason,
                            const std::vector<std::string>& stop_strings) {
  if (reason.empty()) return py::none();
  for (const std::string& s : stop_strings)
    if (s == reason) return Utf8ToStr(reason);
  bool digits = reason.find_first_not_of("0123456789") == std::string::npos;
  if (digits) return py::int_(std::stoll(reason));
  return Utf8ToStr(reason);
}

py::list ToIdList(const std::vector<int32_t>& ids) {
  py::list out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) out[i] = py::int_(ids[i]);
  return out;
}

}  // namespace

py::str Utf8ToStr(const std::string& text) {
  PyObject* s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

SamplingParams ToSamplingParams(py::handle obj) {
  SamplingParams p;
  p.n = IntAttr<int>(obj, "n");
  p.temperature = FloatAttr(obj, "temperature");
  p.top_p = FloatAttr(obj, "top_p");
  p.top_k = IntAttr<int>(obj, "top_k");
  p.min_p = FloatAttr(obj, "min_p");
  p.presence_penalty = FloatAttr(obj, "presence_penalty");
  p.frequency_penalty = FloatAttr(obj, "frequency_penalty");
  p.repetition_penalty = FloatAttr(obj, "repetition_penalty");
  if (!obj.attr("seed").is_none()) {
    // vLLM takes any Python int; the engine's generators take 64 bits (negative wraps, as a
    // C cast of the same value).
    py::object seed = obj.attr("seed");
    if (!py::isinstance<py::int_>(seed) || py::isinstance<py::bool_>(seed))
      throw py::type_error("seed must be an int");
    PyObject* masked = PyNumber_And(seed.ptr(), py::int_(0xFFFFFFFFFFFFFFFFULL).ptr());
    if (masked == nullptr) throw py::error_already_set();
    p.seed = py::reinterpret_steal<py::int_>(masked).cast<uint64_t>();
  }
  for (py::handle s : obj.attr("stop")) {
    if (!py::isinstance<py::str>(s)) throw py::type_error("stop must be a str or a list of str");
    p.stop.push_back(s.cast<std::string>());
  }
  for (py::handle id : obj.attr("stop_token_ids")) {
    if (!py::isinstance<py::int_>(id)) throw py::type_error("stop_token_ids must be a list of int");
    const long long v = id.cast<long long>();
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      throw py::value_error("token_id(s) [" + std::to_string(v) +
                            "] in stop_token_ids contain out-of-vocab token ids.");
    p.stop_token_ids.push_back(static_cast<int32_t>(v));
  }
  p.ignore_eos = BoolAttr(obj, "ignore_eos");
  p.max_tokens = OptionalIntAttr<int>(obj, "max_tokens");
  p.min_tokens = IntAttr<int>(obj, "min_tokens");
  p.logprobs = OptionalIntAttr<int>(obj, "logprobs");
  p.prompt_logprobs = OptionalIntAttr<int>(obj, "prompt_logprobs");
  p.include_stop_str_in_output = BoolAttr(obj, "include_stop_str_in_output");
  p.skip_special_tokens = BoolAttr(obj, "skip_special_tokens");
  // Structured outputs go through the request parser the server uses, so every spelling and
  // check is the same (engine/structured_outputs_json.h).
  if (py::hasattr(obj, "_structured_outputs_json")) {
    py::object so = obj.attr("_structured_outputs_json")();
    if (!so.is_none()) {
      const nlohmann::json body = nlohmann::json::parse(so.cast<std::string>());
      StatusOr<std::optional<StructuredOutputs>> parsed = ParseStructuredOutputs(body);
      if (!parsed.ok()) throw py::value_error(parsed.status().message());
      p.structured_outputs = *parsed;
    }
  }
  py::object bias = obj.attr("logit_bias");
  if (!bias.is_none()) {
    for (auto item : py::cast<py::dict>(bias)) {
      const long long id = py::cast<long long>(item.first);
      if (id < std::numeric_limits<int32_t>::min() || id > std::numeric_limits<int32_t>::max())
        throw py::value_error("token_id(s) [" + std::to_string(id) +
                              "] in logit_bias contain out-of-vocab token ids.");
      p.logit_bias.emplace_back(static_cast<int32_t>(id),
                                static_cast<float>(py::cast<double>(item.second)));
    }
  }
  return p;
}

py::tuple LogprobEntryToPython(const TokenLogprobEntry& e, const Tokenizer& tok) {
  py::list top(e.top.size());
  for (size_t k = 0; k < e.top.size(); ++k) {
    const auto& [id, lp] = e.top[k];
    top[k] = py::make_tuple(id, lp, Utf8ToStr(TokenText(tok, id)));
  }
  return py::make_tuple(e.token_id, e.logprob, e.rank, Utf8ToStr(TokenText(tok, e.token_id)), top);
}

py::list PromptLogprobsToPython(const std::vector<std::optional<TokenLogprobEntry>>& entries,
                                const Tokenizer& tok) {
  py::list out(entries.size());
  for (size_t i = 0; i < entries.size(); ++i)
    out[i] = entries[i].has_value() ? py::object(LogprobEntryToPython(*entries[i], tok))
                                    : py::object(py::none());
  return out;
}

py::tuple RequestOutputToPython(const RequestOutput& r, bool with_logprobs, const Tokenizer& tok,
                                const std::vector<std::string>& stop_strings) {
  py::list outputs(r.outputs.size());
  for (size_t k = 0; k < r.outputs.size(); ++k) {
    const CompletionOutput& c = r.outputs[k];
    py::object logprobs = py::none();
    if (with_logprobs) {
      py::list lps(c.logprobs.size());
      for (size_t j = 0; j < c.logprobs.size(); ++j)
        lps[j] = LogprobEntryToPython(c.logprobs[j], tok);
      logprobs = lps;
    }
    outputs[k] = py::make_tuple(c.index, Utf8ToStr(c.text), ToIdList(c.token_ids), logprobs,
                                FinishReasonOrNone(c.finish_reason),
                                StopReasonOrNone(c.stop_reason, stop_strings));
  }
  py::object prompt_logprobs = py::none();
  if (!r.prompt_logprobs.empty()) prompt_logprobs = PromptLogprobsToPython(r.prompt_logprobs, tok);
  return py::make_tuple(r.request_id, Utf8ToStr(r.prompt), ToIdList(r.prompt_token_ids),
                        prompt_logprobs, r.num_cached_tokens, outputs);
}

py::tuple EngineOutputToPython(const EngineOutput& o, const Tokenizer& tok,
                               const std::vector<std::string>& stop_strings) {
  py::list lps(o.new_logprobs.size());
  for (size_t j = 0; j < o.new_logprobs.size(); ++j)
    lps[j] = LogprobEntryToPython(o.new_logprobs[j], tok);
  py::object prompt_logprobs = py::none();
  if (!o.prompt_logprobs.empty()) prompt_logprobs = PromptLogprobsToPython(o.prompt_logprobs, tok);
  py::object finish =
      o.finished ? py::object(py::str(FinishReasonName(o.finish_reason))) : py::object(py::none());
  return py::make_tuple(o.request_id, ToIdList(o.new_token_ids), Utf8ToStr(o.new_text), lps,
                        prompt_logprobs, o.finished, finish,
                        StopReasonOrNone(o.stop_reason, stop_strings), o.num_cached_tokens,
                        Utf8ToStr(o.error));
}

}  // namespace pagellm::python
