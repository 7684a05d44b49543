// Typed access to the fields of a JSON object (config.json and friends), with errors that name
// the source file and the key. Shared by the config parser and the architecture specs
// (model/arch_spec.h) that read their own fields.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pagellm/status.h"

namespace pagellm {

// Typed access to a JSON object's fields; a missing key and an explicit null both count as
// absent (HF configs write `"rope_scaling": null`). Errors name the source and the key.
class JsonFields {
 public:
  JsonFields(const nlohmann::json& obj, const std::string& source) : obj_(obj), source_(source) {}

  // True when `key` is present, even as null.
  bool HasKey(const char* key) const { return obj_.find(key) != obj_.end(); }

  const nlohmann::json* Get(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  // Integers; floats are accepted when integral (some exporters write 4096.0).
  StatusOr<std::optional<int64_t>> Int(const char* key) const {
    const nlohmann::json* j = Get(key);
    if (j == nullptr) return std::optional<int64_t>();
    if (j->is_number_unsigned()) {
      const uint64_t u = j->get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) return OutOfRange(key);
      return std::optional<int64_t>(static_cast<int64_t>(u));
    }
    if (j->is_number_integer()) {
      const int64_t v = j->get<int64_t>();
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
        return OutOfRange(key);
      }
      return std::optional<int64_t>(v);
    }
    if (j->is_number_float()) {
      const double d = j->get<double>();
      if (!(std::fabs(d) <= std::numeric_limits<int32_t>::max()) || d != std::floor(d)) {
        return WrongType(key, "an integer");
      }
      return std::optional<int64_t>(static_cast<int64_t>(d));
    }
    return WrongType(key, "an integer");
  }

  StatusOr<int> RequiredInt(const char* key) const {
    ASSIGN_OR_RETURN(std::optional<int64_t> v, Int(key));
    if (!v) return InvalidArgumentError(fmt::format("{}: missing '{}'", source_, key));
    return static_cast<int>(*v);
  }

  StatusOr<int> IntOr(const char* key, int dflt) const {
    ASSIGN_OR_RETURN(std::optional<int64_t> v, Int(key));
    return v ? static_cast<int>(*v) : dflt;
  }

  StatusOr<std::optional<double>> Float(const char* key) const {
    const nlohmann::json* j = Get(key);
    if (j == nullptr) return std::optional<double>();
    if (!j->is_number()) return WrongType(key, "a number");
    const double d = j->get<double>();
    if (!std::isfinite(d)) return WrongType(key, "a finite number");
    return std::optional<double>(d);
  }

  StatusOr<float> FloatOr(const char* key, float dflt) const {
    ASSIGN_OR_RETURN(std::optional<double> v, Float(key));
    return v ? static_cast<float>(*v) : dflt;
  }

  StatusOr<float> RequiredFloat(const char* key) const {
    ASSIGN_OR_RETURN(std::optional<double> v, Float(key));
    if (!v) return InvalidArgumentError(fmt::format("{}: missing '{}'", source_, key));
    return static_cast<float>(*v);
  }

  StatusOr<bool> BoolOr(const char* key, bool dflt) const {
    const nlohmann::json* j = Get(key);
    if (j == nullptr) return dflt;
    if (!j->is_boolean()) return WrongType(key, "a boolean");
    return j->get<bool>();
  }

  StatusOr<std::optional<std::string>> String(const char* key) const {
    const nlohmann::json* j = Get(key);
    if (j == nullptr) return std::optional<std::string>();
    if (!j->is_string()) return WrongType(key, "a string");
    return std::optional<std::string>(j->get<std::string>());
  }

  // An id or a list of ids (eos_token_id may be either).
  StatusOr<std::optional<std::vector<int32_t>>> IdList(const char* key) const {
    const nlohmann::json* j = Get(key);
    if (j == nullptr) return std::optional<std::vector<int32_t>>();
    std::vector<int32_t> ids;
    auto take = [&](const nlohmann::json& e) -> Status {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 ||
          e.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return WrongType(key, "a token id or a list of token ids");
      }
      ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
      return Status::Ok();
    };
    if (j->is_array()) {
      for (const nlohmann::json& e : *j) RETURN_IF_ERROR(take(e));
    } else {
      RETURN_IF_ERROR(take(*j));
    }
    return std::optional<std::vector<int32_t>>(std::move(ids));
  }

  Status WrongType(const char* key, const char* want) const {
    return InvalidArgumentError(fmt::format("{}: '{}' must be {}", source_, key, want));
  }
  Status OutOfRange(const char* key) const {
    return OutOfRangeError(fmt::format("{}: '{}' is out of range", source_, key));
  }

 private:
  const nlohmann::json& obj_;
  const std::string& source_;
};

}  // namespace pagellm
