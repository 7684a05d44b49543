#include "chat/jinja_value.h"

#include <algorithm>
#include <cmath>

#include "chat/python_text.h"

namespace pagellm::jinja {
namespace {

const std::string& EmptyString() {
  static const std::string* empty = new std::string();
  return *empty;
}

const std::vector<Value>& EmptyItems() {
  static const std::vector<Value>* empty = new std::vector<Value>();
  return *empty;
}

const ValueDict& EmptyDict() {
  static const ValueDict* empty = new ValueDict();
  return *empty;
}

}  // namespace

Value Value::Undefined(std::string hint, bool unsafe) {
  Value v;
  v.kind_ = Kind::kUndefined;
  v.int_ = unsafe ? 1 : 0;
  if (!hint.empty()) v.ptr_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.int_ = b ? 1 : 0;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = d;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.ptr_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::List(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::kList;
  uint32_t deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, item.nesting_);
  v.nesting_ = deepest + 1;
  v.ptr_ = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}

Value Value::Tuple(std::vector<Value> items) {
  Value v = List(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

Value Value::Dict(ValueDict dict) {
  Value v;
  v.kind_ = Kind::kDict;
  uint32_t deepest = 0;
  for (const auto& [key, value] : dict.entries()) {
    deepest = std::max({deepest, key.nesting_, value.nesting_});
  }
  v.nesting_ = deepest + 1;
  v.ptr_ = std::make_shared<const ValueDict>(std::move(dict));
  return v;
}

Value Value::FromObject(std::shared_ptr<Object> object) {
  Value v;
  v.kind_ = Kind::kObject;
  v.ptr_ = std::move(object);
  return v;
}

const std::string& Value::str() const {
  if (kind_ != Kind::kString || !ptr_) return EmptyString();
  return *static_cast<const std::string*>(ptr_.get());
}

const std::vector<Value>& Value::items() const {
  if (!is_sequence() || !ptr_) return EmptyItems();
  return *static_cast<const std::vector<Value>*>(ptr_.get());
}

const ValueDict& Value::dict() const {
  if (!is_dict() || !ptr_) return EmptyDict();
  return *static_cast<const ValueDict*>(ptr_.get());
}

Object* Value::object() const {
  if (!is_object()) return nullptr;
  return const_cast<Object*>(static_cast<const Object*>(ptr_.get()));
}

std::shared_ptr<Object> Value::object_ptr() const {
  if (!is_object()) return nullptr;
  return std::const_pointer_cast<Object>(std::static_pointer_cast<const Object>(ptr_));
}

const std::string& Value::undefined_hint() const {
  if (!is_undefined() || !ptr_) return EmptyString();
  return *static_cast<const std::string*>(ptr_.get());
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0.0;
    case Kind::kString:
      return !str().empty();
    case Kind::kList:
    case Kind::kTuple:
      return !items().empty();
    case Kind::kDict:
      return !dict().empty();
    case Kind::kObject:
      return true;
  }
  return false;
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kObject:
      return object()->TypeName();
  }
  return "object";
}

StatusOr<std::string> HashKey(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kString:
      return "s" + key.str();
    case Value::Kind::kBool:
    case Value::Kind::kInt:
      return "n" + std::to_string(key.int_value());
    case Value::Kind::kFloat: {
      double d = key.float_value();
      // Integral floats hash like the equal int (hash(1.0) == hash(1)).
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) {
        return "n" + std::to_string(static_cast<int64_t>(d));
      }
      return "f" + PyFloatRepr(d);
    }
    case Value::Kind::kNone:
      return std::string("N");
    case Value::Kind::kUndefined:
      return std::string("U");
    case Value::Kind::kTuple: {
      std::string out = "t";
      for (const Value& item : key.items()) {
        ASSIGN_OR_RETURN(std::string part, HashKey(item));
        out += std::to_string(part.size()) + ":" + part;
      }
      return out;
    }
    case Value::Kind::kObject:
      return "o" + std::to_string(reinterpret_cast<uintptr_t>(key.object()));
    case Value::Kind::kList:
    case Value::Kind::kDict:
      break;
  }
  return InvalidArgumentError("unhashable type: '" + key.TypeName() + "'");
}

StatusOr<const Value*> ValueDict::Find(const Value& key) const {
  ASSIGN_OR_RETURN(std::string hash, HashKey(key));
  auto it = index_.find(hash);
  if (it == index_.end()) return static_cast<const Value*>(nullptr);
  return &entries_[it->second].second;
}

const Value* ValueDict::FindString(std::string_view key) const {
  std::string hash = "s";
  hash.append(key);
  auto it = index_.find(hash);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

Status ValueDict::Set(const Value& key, Value value) {
  ASSIGN_OR_RETURN(std::string hash, HashKey(key));
  auto [it, inserted] = index_.emplace(std::move(hash), entries_.size());
  if (inserted) {
    entries_.emplace_back(key, std::move(value));
  } else {
    entries_[it->second].second = std::move(value);
  }
  return Status::Ok();
}

void ValueDict::SetString(const std::string& key, Value value) {
  auto [it, inserted] = index_.emplace("s" + key, entries_.size());
  if (inserted) {
    entries_.emplace_back(Value::String(key), std::move(value));
  } else {
    entries_[it->second].second = std::move(value);
  }
}

const Value* CallArgs::Keyword(std::string_view name) const {
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return nullptr;
}

std::string Object::Repr() const {
  return "<" + TypeName() + " object>";
}

std::optional<Value> Object::GetAttr(std::string_view name) const {
  return std::nullopt;
}

Status Object::SetAttr(const std::string& name, Value value) {
  return InvalidArgumentError("cannot assign attribute on non-namespace object");
}

StatusOr<Value> Object::Call(Interpreter& interp, const CallArgs& args) const {
  return InvalidArgumentError("'" + TypeName() + "' object is not callable");
}

}  // namespace pagellm::jinja
