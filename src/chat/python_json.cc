#include "chat/python_json.h"

#include <algorithm>
#include <cmath>

#include "chat/python_text.h"
#include "chat/value_ops.h"

namespace pagellm::jinja {
namespace {

Status NotSerializable(const Value& v) {
  return InvalidArgumentError("Object of type " + v.TypeName() + " is not JSON serializable");
}

std::string FloatJson(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return PyFloatRepr(d);
}

StatusOr<std::string> KeyString(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kString:
      return key.str();
    case Value::Kind::kBool:
      return std::string(key.bool_value() ? "true" : "false");
    case Value::Kind::kInt:
      return std::to_string(key.int_value());
    case Value::Kind::kFloat:
      return FloatJson(key.float_value());
    case Value::Kind::kNone:
      return std::string("null");
    default:
      return InvalidArgumentError("keys must be str, int, float, bool or None, not " +
                                  key.TypeName());
  }
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonDumpOptions& o) : opts_(o) {
    item_sep_ = o.item_separator.value_or(o.indent ? "," : ", ");
    key_sep_ = o.key_separator.value_or(": ");
  }

  Status Write(const Value& v, int level) {
    if (out_.size() > kMaxStringBytes)
      return ResourceExhaustedError("value too large for a template");
    switch (v.kind()) {
      case Value::Kind::kNone:
        out_ += "null";
        return Status::Ok();
      case Value::Kind::kBool:
        out_ += v.bool_value() ? "true" : "false";
        return Status::Ok();
      case Value::Kind::kInt:
        out_ += std::to_string(v.int_value());
        return Status::Ok();
      case Value::Kind::kFloat:
        out_ += FloatJson(v.float_value());
        return Status::Ok();
      case Value::Kind::kString:
        out_ += JsonQuote(v.str());
        return Status::Ok();
      case Value::Kind::kList:
      case Value::Kind::kTuple: {
        const auto& items = v.items();
        if (items.empty()) {
          out_ += "[]";
          return Status::Ok();
        }
        out_ += "[";
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out_ += item_sep_;
          Newline(level + 1);
          RETURN_IF_ERROR(Write(items[i], level + 1));
        }
        Newline(level);
        out_ += "]";
        return Status::Ok();
      }
      case Value::Kind::kDict: {
        const auto& entries = v.dict().entries();
        if (entries.empty()) {
          out_ += "{}";
          return Status::Ok();
        }
        std::vector<const std::pair<Value, Value>*> order;
        for (const auto& e : entries) order.push_back(&e);
        if (opts_.sort_keys) {
          Status status = Status::Ok();
          std::stable_sort(order.begin(), order.end(), [&](auto* a, auto* b) {
            auto less = PyCompare(CompareOp::kLt, a->first, b->first);
            if (!less.ok()) {
              if (status.ok()) status = less.status();
              return false;
            }
            return *less;
          });
          RETURN_IF_ERROR(status);
        }
        out_ += "{";
        for (size_t i = 0; i < order.size(); ++i) {
          if (i) out_ += item_sep_;
          Newline(level + 1);
          ASSIGN_OR_RETURN(std::string key, KeyString(order[i]->first));
          out_ += JsonQuote(key);
          out_ += key_sep_;
          RETURN_IF_ERROR(Write(order[i]->second, level + 1));
        }
        Newline(level);
        out_ += "}";
        return Status::Ok();
      }
      default:
        return NotSerializable(v);
    }
  }

  std::string Take() { return std::move(out_); }

 private:
  void Newline(int level) {
    if (!opts_.indent) return;
    out_ += "\n";
    for (int i = 0; i < level && out_.size() <= kMaxStringBytes; ++i) out_ += *opts_.indent;
  }

  const JsonDumpOptions& opts_;
  std::string item_sep_;
  std::string key_sep_;
  std::string out_;
};

template <typename Json>
StatusOr<Value> Convert(const Json& json, uint32_t depth) {
  if (depth > kMaxNesting) return InvalidArgumentError("JSON nested too deeply");
  switch (json.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return Value::None();
    case nlohmann::json::value_t::boolean:
      return Value::Bool(json.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::Int(json.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = json.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::Float(static_cast<double>(u));
      return Value::Int(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value::Float(json.template get<double>());
    case nlohmann::json::value_t::string:
      return Value::String(json.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) {
        ASSIGN_OR_RETURN(Value v, Convert(item, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      ValueDict dict;
      for (auto it = json.begin(); it != json.end(); ++it) {
        ASSIGN_OR_RETURN(Value v, Convert(it.value(), depth + 1));
        dict.SetString(it.key(), std::move(v));
      }
      return Value::Dict(std::move(dict));
    }
    case nlohmann::json::value_t::binary:
      break;
  }
  return InvalidArgumentError("unsupported JSON value");
}

}  // namespace

StatusOr<std::string> PyJsonDumps(const Value& value, const JsonDumpOptions& options) {
  JsonWriter writer(options);
  RETURN_IF_ERROR(writer.Write(value, 0));
  return writer.Take();
}

StatusOr<Value> ValueFromJson(const nlohmann::ordered_json& json) {
  return Convert(json, 0);
}
StatusOr<Value> ValueFromJson(const nlohmann::json& json) {
  return Convert(json, 0);
}

}  // namespace pagellm::jinja
