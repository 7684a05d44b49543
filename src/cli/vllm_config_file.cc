#include "cli/vllm_config_file.h"

#include <yaml-cpp/yaml.h>

#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace pagellm::cli {
namespace {

// A YAML scalar as JSON: booleans, integers and floats by YAML 1.2's core schema, else text.
nlohmann::json ScalarJson(const YAML::Node& node) {
  const std::string text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: always a string
  bool b;
  if (YAML::convert<bool>::decode(node, b) &&
      (text == "true" || text == "false" || text == "True" || text == "False"))
    return b;
  if (text == "null" || text == "~" || text.empty()) return nullptr;
  auto number = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!number.is_discarded() && number.is_number()) return number;
  return text;
}

nlohmann::json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence: {
      nlohmann::json a = nlohmann::json::array();
      for (const YAML::Node& item : node) a.push_back(ToJson(item));
      return a;
    }
    case YAML::NodeType::Map: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& kv : node) o[kv.first.as<std::string>()] = ToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar:
      return ScalarJson(node);
    default:
      return nullptr;
  }
}

// A value on the command line: strings as they are, anything else as JSON text.
std::string ArgText(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

bool GivenOnCommandLine(const std::vector<std::string>& args, const std::string& flag) {
  const std::string negated = "--no-" + flag.substr(2);
  for (const std::string& a : args) {
    if (a == flag || a == negated || a.rfind(flag + "=", 0) == 0) return true;
  }
  return false;
}

}  // namespace

StatusOr<std::vector<std::string>> ExpandConfigFile(
    const std::vector<std::string>& args, const std::function<bool(const std::string&)>& has_flag) {
  std::vector<std::string> rest;
  std::string path;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) {
      if (!path.empty()) return InvalidArgumentError("--config given twice");
      path = args[++i];
    } else if (args[i].rfind("--config=", 0) == 0) {
      if (!path.empty()) return InvalidArgumentError("--config given twice");
      path = args[i].substr(9);
    } else {
      rest.push_back(args[i]);
    }
  }
  if (path.empty()) return args;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(fmt::format("--config {}: {}", path, e.what()));
  }
  if (!root.IsMap())
    return InvalidArgumentError(
        fmt::format("--config {}: expected a mapping of flag: value", path));
  std::vector<std::string> expanded;
  for (const auto& kv : root) {
    std::string key = kv.first.as<std::string>();
    for (char& c : key)
      if (c == '_') c = '-';
    const std::string flag = "--" + key;
    if (GivenOnCommandLine(rest, flag)) continue;  // the command line wins
    const nlohmann::json value = ToJson(kv.second);
    if (value.is_boolean()) {
      if (value.get<bool>()) {
        expanded.push_back(flag);
      } else if (has_flag("--no-" + key)) {
        expanded.push_back("--no-" + key);
      }
    } else if (value.is_array()) {
      if (value.empty()) continue;
      expanded.push_back(flag);
      for (const nlohmann::json& v : value) expanded.push_back(ArgText(v));
    } else if (!value.is_null()) {
      expanded.push_back(flag);
      expanded.push_back(ArgText(value));
    }
  }
  expanded.insert(expanded.end(), rest.begin(), rest.end());
  return expanded;
}

}  // namespace pagellm::cli
