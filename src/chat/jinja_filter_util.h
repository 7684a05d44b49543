// Helpers shared by the filter implementations (jinja_filters.cc, jinja_sequence_filters.cc).
// Internal to the built-in library.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"
#include "chat/python_text.h"
#include "chat/value_ops.h"

namespace pagellm::jinja::filters {

using Args = std::vector<std::optional<Value>>;
using FilterFn = StatusOr<Value> (*)(Interpreter&, const Value&, const CallArgs&);

inline Value Gen(std::vector<Value> items) {
  return Value::FromObject(std::make_shared<Generator>(std::move(items)));
}

inline Status TooLarge() {
  return ResourceExhaustedError("value too large for a template");
}

inline bool Flag(const std::optional<Value>& v, bool fallback) {
  return v ? v->Truthy() : fallback;
}

inline StatusOr<int64_t> IntParam(const std::optional<Value>& v, int64_t fallback,
                                  const char* what) {
  if (!v) return fallback;
  if (!v->is_integral()) {
    return InvalidArgumentError(std::string(what) + " must be an integer, not " + v->TypeName());
  }
  return v->int_value();
}

inline Value IgnoreCase(const Value& v) {
  return v.is_string() ? Value::String(PyLower(v.str())) : v;
}

// jinja2's make_attrgetter: "a.b.0" looks up each part with the sandbox's getitem.
class AttrGetter {
 public:
  AttrGetter(Interpreter& interp, const std::optional<Value>& attribute, bool ignore_case,
             std::optional<Value> fallback = std::nullopt)
      : interp_(interp), ignore_case_(ignore_case), default_(std::move(fallback)) {
    if (!attribute || attribute->is_none()) return;
    if (!attribute->is_string()) {
      parts_.push_back(*attribute);
      return;
    }
    for (const std::string& part : PySplit(attribute->str(), std::string("."), -1)) {
      bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
      auto n = digits ? ParsePyInt(part, 10) : std::nullopt;
      parts_.push_back(n ? Value::Int(*n) : Value::String(part));
    }
  }

  StatusOr<Value> operator()(Value item) const {
    for (const Value& part : parts_) {
      ASSIGN_OR_RETURN(item, interp_.GetItem(item, part));
      if (default_ && !default_->is_none() && item.is_undefined()) item = *default_;
    }
    return ignore_case_ ? IgnoreCase(item) : item;
  }

 private:
  Interpreter& interp_;
  bool ignore_case_;
  std::optional<Value> default_;
  std::vector<Value> parts_;
};

// Sorts by key with Python's `<`, stably; the first comparison error wins.
Status SortByKeys(std::vector<std::pair<Value, Value>>* keyed, bool reverse);

// Sequence filters (jinja_sequence_filters.cc).
StatusOr<Value> Sort(Interpreter& interp, const Value& v, const CallArgs& a);
StatusOr<Value> DictSort(Interpreter& interp, const Value& v, const CallArgs& a);
StatusOr<Value> Unique(Interpreter& interp, const Value& v, const CallArgs& a);
StatusOr<Value> Max(Interpreter& interp, const Value& v, const CallArgs& a);
StatusOr<Value> Min(Interpreter& interp, const Value& v, const CallArgs& a);
StatusOr<Value> Sum(Interpreter& interp, const Value& v, const CallArgs& a);
StatusOr<Value> Batch(Interpreter& interp, const Value& v, const CallArgs& a);
StatusOr<Value> Slice(Interpreter& interp, const Value& v, const CallArgs& a);
StatusOr<Value> Map(Interpreter& interp, const Value& v, const CallArgs& a);
StatusOr<Value> Select(Interpreter& interp, const Value& v, const CallArgs& a);
StatusOr<Value> Reject(Interpreter& interp, const Value& v, const CallArgs& a);
StatusOr<Value> SelectAttr(Interpreter& interp, const Value& v, const CallArgs& a);
StatusOr<Value> RejectAttr(Interpreter& interp, const Value& v, const CallArgs& a);
StatusOr<Value> Attr(Interpreter& interp, const Value& v, const CallArgs& a);
StatusOr<Value> GroupBy(Interpreter& interp, const Value& v, const CallArgs& a);

}  // namespace pagellm::jinja::filters
