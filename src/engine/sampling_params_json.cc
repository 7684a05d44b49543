#include "engine/sampling_params_json.h"

#include "engine/structured_outputs_json.h"
#include "fmt/format.h"

namespace pagellm {
namespace {

Status TypeError(const char* field, const char* want) {
  return InvalidArgumentError(fmt::format("'{}' must be {}", field, want));
}

template <typename T>
Status ReadNumber(const nlohmann::json& body, const char* field, T& out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return Status::Ok();
  if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) return TypeError(field, "an integer");
    const int64_t v = it->get<int64_t>();
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        v > static_cast<int64_t>(std::numeric_limits<T>::max()))
      return InvalidArgumentError(fmt::format("'{}' is out of range: {}", field, v));
    out = static_cast<T>(v);
  } else {
    if (!it->is_number()) return TypeError(field, "a number");
    out = it->get<T>();
  }
  return Status::Ok();
}

Status ReadBool(const nlohmann::json& body, const char* field, bool& out) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return TypeError(field, "a boolean");
  out = it->get<bool>();
  return Status::Ok();
}

}  // namespace

StatusOr<SamplingParams> ParseSamplingParams(const nlohmann::json& body,
                                             const SamplingParams& defaults) {
  if (!body.is_object()) return InvalidArgumentError("request body must be a JSON object");
  SamplingParams p = defaults;
  RETURN_IF_ERROR(ReadNumber(body, "n", p.n));
  RETURN_IF_ERROR(ReadNumber(body, "temperature", p.temperature));
  RETURN_IF_ERROR(ReadNumber(body, "top_p", p.top_p));
  RETURN_IF_ERROR(ReadNumber(body, "top_k", p.top_k));
  RETURN_IF_ERROR(ReadNumber(body, "min_p", p.min_p));
  RETURN_IF_ERROR(ReadNumber(body, "presence_penalty", p.presence_penalty));
  RETURN_IF_ERROR(ReadNumber(body, "frequency_penalty", p.frequency_penalty));
  RETURN_IF_ERROR(ReadNumber(body, "repetition_penalty", p.repetition_penalty));
  RETURN_IF_ERROR(ReadNumber(body, "min_tokens", p.min_tokens));
  RETURN_IF_ERROR(ReadBool(body, "ignore_eos", p.ignore_eos));
  RETURN_IF_ERROR(ReadBool(body, "include_stop_str_in_output", p.include_stop_str_in_output));
  RETURN_IF_ERROR(ReadBool(body, "skip_special_tokens", p.skip_special_tokens));
  if (auto it = body.find("seed"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer()) return TypeError("seed", "an integer");
    p.seed =
        it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
  }
  for (const char* field : {"max_tokens", "max_completion_tokens"}) {
    auto it = body.find(field);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_number_integer()) return TypeError(field, "an integer");
    const int64_t v = it->get<int64_t>();
    if (v < 1 || v > std::numeric_limits<int32_t>::max())
      return InvalidArgumentError(fmt::format("{} must be at least 1, got {}.", field, v));
    p.max_tokens = static_cast<int>(v);
  }
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    p.stop.clear();
    if (it->is_string()) {
      p.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const auto& s : *it) {
        if (!s.is_string()) return TypeError("stop", "a string or a list of strings");
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      return TypeError("stop", "a string or a list of strings");
    }
  }
  if (auto it = body.find("stop_token_ids"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return TypeError("stop_token_ids", "a list of integers");
    p.stop_token_ids.clear();
    for (const auto& v : *it) {
      if (!v.is_number_integer()) return TypeError("stop_token_ids", "a list of integers");
      p.stop_token_ids.push_back(v.get<int32_t>());
    }
  }
  // logprobs: an integer (completions, vLLM offline) or a boolean with top_logprobs (chat).
  if (auto it = body.find("logprobs"); it != body.end() && !it->is_null()) {
    if (it->is_boolean()) {
      if (it->get<bool>()) {
        int top = 0;
        RETURN_IF_ERROR(ReadNumber(body, "top_logprobs", top));
        p.logprobs = top;
      }
    } else if (it->is_number_integer()) {
      p.logprobs = it->get<int>();
    } else {
      return TypeError("logprobs", "an integer or a boolean");
    }
  }
  if (auto it = body.find("prompt_logprobs"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer()) return TypeError("prompt_logprobs", "an integer");
    p.prompt_logprobs = it->get<int>();
  }
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return TypeError("logit_bias", "an object of token id -> bias");
    p.logit_bias.clear();
    for (const auto& [key, value] : it->items()) {
      if (!value.is_number()) return TypeError("logit_bias", "an object of token id -> bias");
      int32_t id;
      try {
        size_t used = 0;
        id = std::stoi(key, &used);
        if (used != key.size()) throw std::invalid_argument(key);
      } catch (...) {
        return InvalidArgumentError(fmt::format("logit_bias key '{}' is not a token id", key));
      }
      p.logit_bias.emplace_back(id, value.get<float>());
    }
  }
  ASSIGN_OR_RETURN(std::optional<StructuredOutputs> constraint, ParseStructuredOutputs(body));
  if (constraint.has_value()) p.structured_outputs = std::move(constraint);
  return p;
}

SamplingParams DefaultSamplingParams(const LoadedModel& model) {
  SamplingParams p;
  const auto& d = model.generation_defaults;
  if (d.temperature >= 0) p.temperature = d.temperature;
  if (d.top_p > 0) p.top_p = d.top_p;
  if (d.top_k >= 0) p.top_k = d.top_k;
  if (d.min_p >= 0) p.min_p = d.min_p;
  if (d.repetition_penalty > 0) p.repetition_penalty = d.repetition_penalty;
  return p;
}

}  // namespace pagellm
