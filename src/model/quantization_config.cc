#include "model/quantization_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "model/json_fields.h"

namespace pagellm {

bool HfQuantConfig::Skips(const std::string& module) const {
  return std::any_of(modules_to_not_convert.begin(), modules_to_not_convert.end(),
                     [&](const std::string& m) { return module.find(m) != std::string::npos; });
}

WeightFormat HfQuantConfig::Format() const {
  return MakeHfQuantFormat(method, bits, group_size, zero_offset);
}

StatusOr<HfQuantConfig> ParseQuantizationConfig(const std::string& json_text,
                                                const std::string& source, bool nested) {
  nlohmann::json root = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return InvalidArgumentError(source + ": not a valid JSON object");
  }
  HfQuantConfig q;
  const nlohmann::json* obj = &root;
  std::string where = source;
  if (nested) {
    auto it = root.find("quantization_config");
    if (it == root.end() || it->is_null()) return q;
    if (!it->is_object()) {
      return InvalidArgumentError(source + ": 'quantization_config' must be an object");
    }
    obj = &*it;
    where = source + ": quantization_config";
  }
  const JsonFields f(*obj, where);
  ASSIGN_OR_RETURN(std::optional<std::string> method, f.String("quant_method"));
  std::string m = method.value_or(nested ? "" : "gptq");  // quantize_config.json: AutoGPTQ
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
  if (m == "awq") {
    q.method = HfQuantMethod::kAwq;
  } else if (m == "gptq") {
    q.method = HfQuantMethod::kGptq;
  } else {
    return UnimplementedError(
        fmt::format("{}: quant_method '{}' is not supported (awq, gptq)", where, m));
  }
  q.enabled = true;
  if (q.method == HfQuantMethod::kAwq) {
    ASSIGN_OR_RETURN(std::optional<int64_t> bits, f.Int("bits"));
    if (!bits) {
      ASSIGN_OR_RETURN(bits, f.Int("w_bit"));
    }
    ASSIGN_OR_RETURN(std::optional<int64_t> group, f.Int("group_size"));
    if (!group) {
      ASSIGN_OR_RETURN(group, f.Int("q_group_size"));
    }
    if (!bits || !group) {
      return InvalidArgumentError(where + ": AWQ needs 'bits' and 'group_size'");
    }
    q.bits = static_cast<int>(*bits);
    q.group_size = *group;
    ASSIGN_OR_RETURN(bool zero_point, f.BoolOr("zero_point", true));
    if (!zero_point) {
      return UnimplementedError(where + ": AWQ 'zero_point' false is not supported");
    }
    ASSIGN_OR_RETURN(std::optional<std::string> version, f.String("version"));
    q.checkpoint_format = version.value_or("gemm");
    std::transform(q.checkpoint_format.begin(), q.checkpoint_format.end(),
                   q.checkpoint_format.begin(), [](unsigned char c) { return std::tolower(c); });
    if (q.checkpoint_format != "gemm") {
      return UnimplementedError(fmt::format(
          "{}: AWQ version '{}' is not supported (the gemm layout)", where, q.checkpoint_format));
    }
    if (const nlohmann::json* skip = f.Get("modules_to_not_convert")) {
      if (!skip->is_array()) return f.WrongType("modules_to_not_convert", "a list of names");
      for (const nlohmann::json& s : *skip) {
        if (!s.is_string()) return f.WrongType("modules_to_not_convert", "a list of names");
        q.modules_to_not_convert.push_back(s.get<std::string>());
      }
    }
  } else {
    ASSIGN_OR_RETURN(std::optional<int64_t> bits, f.Int("bits"));
    ASSIGN_OR_RETURN(std::optional<int64_t> group, f.Int("group_size"));
    if (!bits || !group) {
      return InvalidArgumentError(where + ": GPTQ needs 'bits' and 'group_size'");
    }
    q.bits = static_cast<int>(*bits);
    q.group_size = *group;
    ASSIGN_OR_RETURN(q.desc_act, f.BoolOr("desc_act", false));
    ASSIGN_OR_RETURN(q.sym, f.BoolOr("sym", true));
    ASSIGN_OR_RETURN(std::optional<std::string> format, f.String("checkpoint_format"));
    q.checkpoint_format = format.value_or("gptq");
    if (q.checkpoint_format == "gptq") {
      q.zero_offset = 1;
    } else if (q.checkpoint_format == "gptq_v2") {
      q.zero_offset = 0;
    } else {
      return UnimplementedError(
          fmt::format("{}: GPTQ checkpoint_format '{}' is not supported (gptq, gptq_v2)", where,
                      q.checkpoint_format));
    }
  }
  const std::string why = CheckHfQuantParams(q.method, q.bits, q.group_size);
  if (!why.empty()) return UnimplementedError(fmt::format("{}: {}", where, why));
  return q;
}

Status CheckQuantizationOption(const std::string& option, const HfQuantConfig& checkpoint,
                               const std::string& model_dir) {
  if (option.empty() || option == "none" || option == "None") return Status::Ok();
  std::string want;
  if (option == "awq" || option == "awq_marlin") {
    want = "awq";
  } else if (option == "gptq" || option == "gptq_marlin") {
    want = "gptq";
  } else {
    return InvalidArgumentError(fmt::format(
        "--quantization {}: {} is a Hugging Face directory; expected awq, awq_marlin, gptq or "
        "gptq_marlin (or none)",
        option, model_dir));
  }
  if (!checkpoint.enabled) {
    return InvalidArgumentError(fmt::format(
        "--quantization {}: {} has no quantization_config (config.json) or quantize_config.json; "
        "it is not an {} checkpoint",
        option, model_dir, want == "awq" ? "AWQ" : "GPTQ"));
  }
  if (want != checkpoint.method_name()) {
    return InvalidArgumentError(
        fmt::format("--quantization {}: the checkpoint {} is quantized with {}, not {}", option,
                    model_dir, checkpoint.method_name(), want));
  }
  return Status::Ok();
}

}  // namespace pagellm
