// The built-in library of the Jinja engine: jinja2's filters and tests, the globals that
// transformers and jinja2 provide (range, dict, namespace, cycler, joiner, raise_exception,
// strftime_now), and the Python methods of str, dict and list that templates call. The
// implementations live in jinja_filters.cc, jinja_tests.cc, jinja_globals.cc and
// jinja_methods.cc.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_value.h"
#include "pagellm/status.h"

namespace pagellm::jinja {

bool IsKnownFilter(std::string_view name);
bool IsKnownTest(std::string_view name);

StatusOr<Value> CallFilter(Interpreter& interp, const std::string& name, const Value& input,
                           const CallArgs& args);
StatusOr<bool> CallTest(Interpreter& interp, const std::string& name, const Value& input,
                        const CallArgs& args);

// A global function (range, dict, namespace, ...), or nullopt.
std::optional<Value> LookupGlobal(std::string_view name);

// Whether `self` has a Python method `name`; *unsafe is set for methods that mutate (the
// immutable sandbox hides them).
bool HasMethod(const Value& self, std::string_view name, bool* unsafe);
StatusOr<Value> CallMethod(Interpreter& interp, const Value& self, const std::string& name,
                           const CallArgs& args);

// Binds call arguments to a Python-style signature: positional first, then keywords by
// name. Unfilled parameters are nullopt. Fails like Python on surplus, unknown or duplicate
// arguments.
StatusOr<std::vector<std::optional<Value>>> BindArgs(
    std::string_view function, const CallArgs& args,
    std::initializer_list<std::string_view> params);

// A mutable attribute bag created by namespace(...): the one object templates can modify.
class Namespace : public Object {
 public:
  std::string TypeName() const override { return "Namespace"; }
  std::string Repr() const override;
  std::optional<Value> GetAttr(std::string_view name) const override;
  bool IsNamespace() const override { return true; }
  Status SetAttr(const std::string& name, Value value) override;
  // Drops all attributes; the interpreter calls this after rendering to break reference
  // cycles a template may have built ({% set ns.self = ns %}).
  void Clear() { attrs_ = ValueDict(); }

 private:
  ValueDict attrs_;
};

// A callable implemented in C++ (global functions and bound methods).
class NativeFunction : public Object {
 public:
  using Fn = StatusOr<Value> (*)(Interpreter& interp, const Value& self, const std::string& name,
                                 const CallArgs& args);
  NativeFunction(std::string name, Value self, Fn fn)
      : name_(std::move(name)), self_(std::move(self)), fn_(fn) {}
  std::string TypeName() const override { return "builtin_function_or_method"; }
  std::string Repr() const override { return "<built-in function " + name_ + ">"; }
  bool IsCallable() const override { return true; }
  StatusOr<Value> Call(Interpreter& interp, const CallArgs& args) const override {
    return fn_(interp, self_, name_, args);
  }

 private:
  std::string name_;
  Value self_;
  Fn fn_;
};

}  // namespace pagellm::jinja
