#include "server/generation_defaults.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/sampling_params_json.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

using nlohmann::json;

// Applies the sampling keys vLLM takes from a generation config; others (eos ids, do_sample,
// ...) are not sampling defaults.
Status Apply(const json& config, const std::string& source, GenerationDefaults* d) {
  if (!config.is_object()) return InvalidArgumentError(source + ": expected a JSON object");
  auto number = [&](const char* key, auto* out) -> Status {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) return Status::Ok();
    if (!it->is_number())
      return InvalidArgumentError(fmt::format("{}: '{}' must be a number", source, key));
    *out = it->get<std::remove_pointer_t<decltype(out)>>();
    return Status::Ok();
  };
  RETURN_IF_ERROR(number("temperature", &d->params.temperature));
  RETURN_IF_ERROR(number("top_p", &d->params.top_p));
  RETURN_IF_ERROR(number("top_k", &d->params.top_k));
  RETURN_IF_ERROR(number("min_p", &d->params.min_p));
  RETURN_IF_ERROR(number("repetition_penalty", &d->params.repetition_penalty));
  if (auto it = config.find("max_new_tokens"); it != config.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > INT32_MAX)
      return InvalidArgumentError(source + ": 'max_new_tokens' must be a positive integer");
    d->max_new_tokens = it->get<int>();
  }
  return Status::Ok();
}

StatusOr<json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("--generation-config: cannot read {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError(path + ": not valid JSON");
  return j;
}

}  // namespace

StatusOr<GenerationDefaults> ResolveGenerationDefaults(const std::string& mode,
                                                       const std::string& override_json,
                                                       const LoadedModel& model) {
  GenerationDefaults d;
  if (mode == "auto") {
    d.params = DefaultSamplingParams(model);
    // max_new_tokens of the model's own file.
    const std::string path = model.path + "/generation_config.json";
    std::error_code ec;
    if (model.format != "gguf" && std::filesystem::is_regular_file(path, ec)) {
      ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
      if (auto it = j.find("max_new_tokens"); it != j.end() && it->is_number_integer() &&
                                              it->get<int64_t>() > 0 &&
                                              it->get<int64_t>() <= INT32_MAX)
        d.max_new_tokens = it->get<int>();
    }
  } else if (mode != "vllm") {
    std::error_code ec;
    if (!std::filesystem::is_directory(mode, ec))
      return InvalidArgumentError(
          fmt::format("--generation-config {}: expected auto, vllm or a directory holding "
                      "generation_config.json",
                      mode));
    const std::string path = mode + "/generation_config.json";
    ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
    RETURN_IF_ERROR(Apply(j, path, &d));
  }
  if (!override_json.empty()) {
    json j = json::parse(override_json, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      return InvalidArgumentError("--override-generation-config: expected a JSON object");
    RETURN_IF_ERROR(Apply(j, "--override-generation-config", &d));
  }
  return d;
}

}  // namespace pagellm
