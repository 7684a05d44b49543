#include "spec/speculative_config_parser.h"

#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace pagellm {

namespace {

constexpr int32_t kMaxSpecLen = 32;  // vLLM's MAX_SPEC_LEN

StatusOr<int32_t> GetInt(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number_integer())
    return InvalidArgumentError(
        fmt::format("--speculative-config: \"{}\" must be an integer, got {}", key, v.dump()));
  return static_cast<int32_t>(v.get<int64_t>());
}

}  // namespace

const char* SpeculativeMethodName(SpeculativeMethod method) {
  switch (method) {
    case SpeculativeMethod::kNone:
      return "";
    case SpeculativeMethod::kDraftModel:
      return "draft_model";
    case SpeculativeMethod::kNgram:
      return "ngram";
  }
  return "unknown";
}

StatusOr<SpeculativeMethod> ParseSpeculativeMethod(const std::string& name) {
  for (SpeculativeMethod m :
       {SpeculativeMethod::kNone, SpeculativeMethod::kDraftModel, SpeculativeMethod::kNgram}) {
    if (name == SpeculativeMethodName(m)) return m;
  }
  return InvalidArgumentError(
      fmt::format("speculative method '{}' is not supported (use draft_model or ngram)", name));
}

Status MergeSpeculativeConfigJson(const std::string& json, SpeculativeConfig& c) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgumentError(
        fmt::format("--speculative-config must be a JSON object, got '{}'", json));
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    if (key == "method" || key == "model") {
      if (!v.is_string() && !v.is_null())
        return InvalidArgumentError(
            fmt::format("--speculative-config: \"{}\" must be a string", key));
      const std::string s = v.is_null() ? "" : v.get<std::string>();
      if (key == "method") {
        ASSIGN_OR_RETURN(c.method, ParseSpeculativeMethod(s));
      } else {
        c.model = s;
      }
    } else if (key == "num_speculative_tokens") {
      ASSIGN_OR_RETURN(c.num_speculative_tokens, GetInt(v, key));
    } else if (key == "max_model_len") {
      ASSIGN_OR_RETURN(c.max_model_len, GetInt(v, key));
    } else if (key == "prompt_lookup_min") {
      ASSIGN_OR_RETURN(c.prompt_lookup_min, GetInt(v, key));
    } else if (key == "prompt_lookup_max") {
      ASSIGN_OR_RETURN(c.prompt_lookup_max, GetInt(v, key));
    } else if (key == "draft_policy") {
      if (!v.is_string())
        return InvalidArgumentError("--speculative-config: \"draft_policy\" must be a string");
      c.draft_policy = v.get<std::string>();
    } else if (key == "ngram_rule") {
      if (!v.is_string())
        return InvalidArgumentError("--speculative-config: \"ngram_rule\" must be a string");
      c.ngram_rule = v.get<std::string>();
    } else if (key == "draft_free_tokens") {
      if (!v.is_number())
        return InvalidArgumentError(fmt::format(
            "--speculative-config: \"draft_free_tokens\" must be a number, got {}", v.dump()));
      c.draft_free_tokens = v.get<double>();
    } else {
      return InvalidArgumentError(fmt::format(
          "--speculative-config: unknown key \"{}\" (supported: method, model, "
          "num_speculative_tokens, max_model_len, prompt_lookup_min, prompt_lookup_max, "
          "draft_policy, draft_free_tokens, ngram_rule)",
          key));
    }
  }
  return Status::Ok();
}

Status ResolveSpeculativeConfig(SpeculativeConfig& c) {
  // vLLM's old spelling of n-gram drafting.
  if (c.model == "[ngram]" || c.model == "ngram") {
    c.method = SpeculativeMethod::kNgram;
    c.model.clear();
  }
  if (c.method == SpeculativeMethod::kNone && !c.model.empty())
    c.method = SpeculativeMethod::kDraftModel;
  if (c.method == SpeculativeMethod::kNone) {
    if (c.num_speculative_tokens > 0)
      return InvalidArgumentError(
          "--num-speculative-tokens needs a draft: --speculative-model PATH or "
          "--speculative-config with a method");
    return Status::Ok();
  }
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > kMaxSpecLen)
    return InvalidArgumentError(
        fmt::format("num_speculative_tokens must be in [1, {}] for speculative decoding, got {}",
                    kMaxSpecLen, c.num_speculative_tokens));
  if (c.max_model_len < 0) return InvalidArgumentError("speculative max_model_len must be >= 0");
  if (c.draft_policy != "adaptive" && c.draft_policy != "fixed")
    return InvalidArgumentError(fmt::format(
        "speculative draft_policy must be adaptive or fixed, got '{}'", c.draft_policy));
  if (c.ngram_rule != "vote" && c.ngram_rule != "earliest")
    return InvalidArgumentError(
        fmt::format("speculative ngram_rule must be vote or earliest, got '{}'", c.ngram_rule));
  if (!(c.draft_free_tokens >= 1.0 && c.draft_free_tokens <= 1e6))
    return InvalidArgumentError(fmt::format(
        "speculative draft_free_tokens must be in [1, 1e6], got {}", c.draft_free_tokens));
  if (c.method == SpeculativeMethod::kDraftModel) {
    if (c.model.empty())
      return InvalidArgumentError("speculative method draft_model needs a model path");
    return Status::Ok();
  }
  if (!c.model.empty()) return InvalidArgumentError("speculative method ngram takes no model");
  if (c.prompt_lookup_min == 0 && c.prompt_lookup_max == 0) {
    c.prompt_lookup_min = c.prompt_lookup_max = 5;
  } else if (c.prompt_lookup_min == 0) {
    c.prompt_lookup_min = c.prompt_lookup_max;
  } else if (c.prompt_lookup_max == 0) {
    c.prompt_lookup_max = c.prompt_lookup_min;
  }
  if (c.prompt_lookup_min < 1 || c.prompt_lookup_max < c.prompt_lookup_min)
    return InvalidArgumentError(
        fmt::format("prompt_lookup_min ({}) must be >= 1 and <= prompt_lookup_max ({})",
                    c.prompt_lookup_min, c.prompt_lookup_max));
  return Status::Ok();
}

}  // namespace pagellm
