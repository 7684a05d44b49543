// JSON in and out of the Jinja engine. Serialization is Python's json.dumps as transformers'
// tojson filter calls it (ensure_ascii=False, insertion order unless sort_keys, Python float
// repr, ", "/": " separators); conversion from nlohmann JSON keeps object key order when
// given an ordered_json.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja_value.h"
#include "pagellm/status.h"

namespace pagellm::jinja {

struct JsonDumpOptions {
  std::optional<std::string> indent;  // json.dumps(indent=...): spaces or a literal string
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
};

StatusOr<std::string> PyJsonDumps(const Value& value, const JsonDumpOptions& options);

// JSON -> Value. Fails on nesting deeper than kMaxNesting.
StatusOr<Value> ValueFromJson(const nlohmann::ordered_json& json);
StatusOr<Value> ValueFromJson(const nlohmann::json& json);

}  // namespace pagellm::jinja
