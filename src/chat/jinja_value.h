// Value: the dynamically typed value of the Jinja engine, modelled on the Python objects that
// jinja2 manipulates (str, int, float, bool, None, list, tuple, dict, jinja2's Undefined) plus
// engine objects (namespaces, macros, loop state, bound methods) behind the Object interface.
//
// Containers are immutable once built and shared by pointer: HF templates run in jinja2's
// ImmutableSandboxedEnvironment, where lists and dicts cannot be mutated, so sharing is safe
// and copying a Value is cheap. The only mutable objects are namespaces.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pagellm/status.h"

namespace pagellm::jinja {

class Interpreter;
class Object;
class ValueDict;

// Deepest container nesting a value may have (Python's json and repr give up near 1000).
inline constexpr uint32_t kMaxNesting = 256;

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kObject,
  };

  // Default: undefined with no hint.
  Value() = default;

  // An undefined value. `hint` is the message used when the value is misused ("'x' is
  // undefined"); `unsafe` marks attributes the sandbox refused (misuse is a security error).
  static Value Undefined(std::string hint = {}, bool unsafe = false);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value List(std::vector<Value> items);
  static Value Tuple(std::vector<Value> items);
  static Value Dict(ValueDict dict);
  static Value FromObject(std::shared_ptr<Object> object);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python numbers: bool is an int subclass.
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_integral() const { return is_bool() || is_int(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  bool is_sequence() const { return is_list() || is_tuple(); }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_object() const { return kind_ == Kind::kObject; }

  bool bool_value() const { return int_ != 0; }
  // Integral value of a bool or int.
  int64_t int_value() const { return int_; }
  double float_value() const { return float_; }
  // Numeric value of any number as a double.
  double AsDouble() const { return is_float() ? float_ : static_cast<double>(int_); }
  const std::string& str() const;
  const std::vector<Value>& items() const;
  const ValueDict& dict() const;
  Object* object() const;
  std::shared_ptr<Object> object_ptr() const;
  const std::string& undefined_hint() const;
  bool undefined_is_unsafe() const { return int_ != 0; }

  // Container nesting depth (0 for scalars). Recursive operations (repr, equality, JSON)
  // rely on it staying small; the interpreter rejects values nested deeper than
  // kMaxNesting.
  uint32_t nesting() const { return nesting_; }

  // Identity of the shared payload (Python's `is` for containers and objects).
  const void* identity() const { return ptr_.get(); }

  // Python truthiness.
  bool Truthy() const;
  // Python's type name, used in error messages ("str", "int", "NoneType", ...).
  std::string TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  uint32_t nesting_ = 0;
  int64_t int_ = 0;  // bool, int; for undefined: 1 when unsafe
  double float_ = 0;
  // std::string (string, undefined hint), std::vector<Value> (list, tuple), ValueDict or
  // Object, according to kind_; one pointer keeps Value small.
  std::shared_ptr<const void> ptr_;
};

// An insertion-ordered dict, like Python's. Keys compare with Python's hash semantics for the
// hashable key types (str, int, float, bool, None, tuples of those): 1, 1.0 and True are the
// same key.
class ValueDict {
 public:
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }

  // Returns the value for `key`, or nullptr; an error if the key is unhashable.
  StatusOr<const Value*> Find(const Value& key) const;
  const Value* FindString(std::string_view key) const;
  // Inserts or overwrites (keeping the original position, as Python does).
  Status Set(const Value& key, Value value);
  void SetString(const std::string& key, Value value);

 private:
  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;
};

// Python hash-equivalence key for a dict key, or an error for unhashable types.
StatusOr<std::string> HashKey(const Value& key);

// Arguments of a call: positional, then keyword arguments in source order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  const Value* Keyword(std::string_view name) const;
};

// Engine objects: anything with attributes or that can be called.
class Object {
 public:
  virtual ~Object() = default;
  // Python-ish type name for messages ("Namespace", "Macro", "builtin_function_or_method").
  virtual std::string TypeName() const = 0;
  // str() of the object.
  virtual std::string Repr() const;
  // Attribute lookup; nullopt when the object has no such attribute.
  virtual std::optional<Value> GetAttr(std::string_view name) const;
  virtual bool IsNamespace() const { return false; }
  virtual Status SetAttr(const std::string& name, Value value);
  virtual bool IsCallable() const { return false; }
  virtual StatusOr<Value> Call(Interpreter& interp, const CallArgs& args) const;
  // Items when iterated (for loops, filters, `in`), or nullopt when not iterable.
  virtual std::optional<std::vector<Value>> Iterate() const { return std::nullopt; }
};

// What jinja2's lazy filters (map, select, reject, unique, items, batch, reverse) return: a
// Python iterator. It is always truthy, has no len(), and yields its items only once.
class Generator : public Object {
 public:
  explicit Generator(std::vector<Value> items) : items_(std::move(items)) {}
  std::string TypeName() const override { return "generator"; }
  std::string Repr() const override { return "<generator object>"; }
  std::optional<std::vector<Value>> Iterate() const override {
    if (consumed_) return std::vector<Value>{};
    consumed_ = true;
    return std::move(items_);
  }

 private:
  mutable std::vector<Value> items_;
  mutable bool consumed_ = false;
};

}  // namespace pagellm::jinja
