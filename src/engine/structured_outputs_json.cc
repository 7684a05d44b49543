#include "engine/structured_outputs_json.h"

#include <string>
#include <utility>
#include <vector>

#include "fmt/format.h"

namespace pagellm {
namespace {

using nlohmann::json;
using Kind = StructuredOutputs::Kind;

bool IsSet(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && !it->is_null();
}

// A schema given as an object (or boolean), or as JSON text.
StatusOr<std::string> SchemaText(const json& v, const std::string& field) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() || v.is_boolean()) return v.dump();
  return InvalidArgumentError(fmt::format("'{}' must be a JSON Schema object", field));
}

StatusOr<std::string> Text(const json& v, const std::string& field) {
  if (!v.is_string()) return InvalidArgumentError(fmt::format("'{}' must be a string", field));
  return v.get<std::string>();
}

StatusOr<std::vector<std::string>> Choices(const json& v, const std::string& field) {
  if (!v.is_array() || v.empty())
    return InvalidArgumentError(fmt::format("'{}' must be a non-empty list of strings", field));
  std::vector<std::string> out;
  for (const json& c : v) {
    if (!c.is_string())
      return InvalidArgumentError(fmt::format("'{}' must be a non-empty list of strings", field));
    out.push_back(c.get<std::string>());
  }
  return out;
}

struct Found {
  std::string field;
  StructuredOutputs spec;
};

Status FromResponseFormat(const json& rf, std::vector<Found>& found) {
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    return InvalidArgumentError("'response_format' must be an object with a string 'type'");
  const std::string type = rf["type"];
  StructuredOutputs s;
  if (type == "text") return Status::Ok();
  if (type == "json_object") {
    if (IsSet(rf, "schema")) {  // llama.cpp's extension
      s.kind = Kind::kJson;
      ASSIGN_OR_RETURN(s.spec, SchemaText(rf["schema"], "response_format.schema"));
    } else {
      s.kind = Kind::kJsonObject;
    }
  } else if (type == "json_schema") {
    if (!IsSet(rf, "json_schema") || !rf["json_schema"].is_object())
      return InvalidArgumentError(
          "response_format of type json_schema needs a 'json_schema' object with a 'schema'");
    const json& js = rf["json_schema"];
    if (IsSet(js, "schema")) {
      s.kind = Kind::kJson;
      ASSIGN_OR_RETURN(s.spec, SchemaText(js["schema"], "response_format.json_schema.schema"));
    } else {
      s.kind = Kind::kJsonObject;
    }
  } else {
    return InvalidArgumentError(fmt::format(
        "response_format type must be 'text', 'json_object' or 'json_schema', got '{}'", type));
  }
  found.push_back({"response_format", std::move(s)});
  return Status::Ok();
}

// structured_outputs / guided_decoding object, or the legacy guided_* fields of `body`.
Status FromVllm(const json& obj, const std::string& prefix, const char* json_key,
                const char* regex_key, const char* choice_key, const char* grammar_key,
                const char* json_object_key, std::vector<Found>& found) {
  auto name = [&](const char* key) { return prefix + key; };
  if (IsSet(obj, json_key)) {
    StructuredOutputs s;
    s.kind = Kind::kJson;
    ASSIGN_OR_RETURN(s.spec, SchemaText(obj[json_key], name(json_key)));
    found.push_back({name(json_key), std::move(s)});
  }
  if (IsSet(obj, regex_key)) {
    StructuredOutputs s;
    s.kind = Kind::kRegex;
    ASSIGN_OR_RETURN(s.spec, Text(obj[regex_key], name(regex_key)));
    found.push_back({name(regex_key), std::move(s)});
  }
  if (IsSet(obj, choice_key)) {
    StructuredOutputs s;
    s.kind = Kind::kChoice;
    ASSIGN_OR_RETURN(s.choice, Choices(obj[choice_key], name(choice_key)));
    found.push_back({name(choice_key), std::move(s)});
  }
  if (IsSet(obj, grammar_key)) {
    StructuredOutputs s;
    s.kind = Kind::kGrammar;
    ASSIGN_OR_RETURN(s.spec, Text(obj[grammar_key], name(grammar_key)));
    found.push_back({name(grammar_key), std::move(s)});
  }
  if (json_object_key != nullptr && IsSet(obj, json_object_key)) {
    if (!obj[json_object_key].is_boolean())
      return InvalidArgumentError(fmt::format("'{}' must be a boolean", name(json_object_key)));
    if (obj[json_object_key].get<bool>()) {
      StructuredOutputs s;
      s.kind = Kind::kJsonObject;
      found.push_back({name(json_object_key), std::move(s)});
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::optional<StructuredOutputs>> ParseStructuredOutputs(const json& body) {
  std::vector<Found> found;
  std::optional<std::string> whitespace;
  if (IsSet(body, "response_format"))
    RETURN_IF_ERROR(FromResponseFormat(body["response_format"], found));
  for (const char* key : {"structured_outputs", "guided_decoding"}) {
    if (!IsSet(body, key)) continue;
    const json& so = body[key];
    if (!so.is_object()) return InvalidArgumentError(fmt::format("'{}' must be an object", key));
    if (IsSet(so, "structural_tag"))
      return InvalidArgumentError(fmt::format("'{}.structural_tag' is not supported", key));
    const std::string prefix = std::string(key) + ".";
    RETURN_IF_ERROR(
        FromVllm(so, prefix, "json", "regex", "choice", "grammar", "json_object", found));
    if (IsSet(so, "whitespace_pattern")) {
      ASSIGN_OR_RETURN(whitespace, Text(so["whitespace_pattern"], prefix + "whitespace_pattern"));
    }
  }
  RETURN_IF_ERROR(FromVllm(body, "", "guided_json", "guided_regex", "guided_choice",
                           "guided_grammar", nullptr, found));
  if (IsSet(body, "guided_whitespace_pattern")) {
    ASSIGN_OR_RETURN(whitespace,
                     Text(body["guided_whitespace_pattern"], "guided_whitespace_pattern"));
  }
  // llama.cpp's server fields.
  if (IsSet(body, "grammar")) {
    StructuredOutputs s;
    s.kind = Kind::kGrammar;
    ASSIGN_OR_RETURN(s.spec, Text(body["grammar"], "grammar"));
    found.push_back({"grammar", std::move(s)});
  }
  if (IsSet(body, "json_schema")) {
    StructuredOutputs s;
    s.kind = Kind::kJson;
    ASSIGN_OR_RETURN(s.spec, SchemaText(body["json_schema"], "json_schema"));
    found.push_back({"json_schema", std::move(s)});
  }
  if (found.empty()) {
    if (whitespace.has_value())
      return InvalidArgumentError("a whitespace pattern was given without a JSON constraint");
    return std::optional<StructuredOutputs>();
  }
  if (found.size() > 1)
    return InvalidArgumentError(
        fmt::format("only one structured output constraint may be given, got '{}' and '{}'",
                    found[0].field, found[1].field));
  StructuredOutputs s = std::move(found[0].spec);
  if (whitespace.has_value()) {
    if (s.kind != Kind::kJson && s.kind != Kind::kJsonObject)
      return InvalidArgumentError("a whitespace pattern applies only to JSON constraints");
    s.whitespace_pattern = std::move(whitespace);
  }
  return std::optional<StructuredOutputs>(std::move(s));
}

}  // namespace pagellm
