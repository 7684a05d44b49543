// Global functions of the template environment (jinja2's defaults plus transformers'
// raise_exception and strftime_now), argument binding, and namespaces.
#include <ctime>
#include <memory>
#include <string>

#include "chat/jinja_builtins.h"
#include "chat/jinja_interpreter.h"
#include "chat/value_ops.h"

namespace pagellm::jinja {
namespace {

// jinja2's sandbox refuses ranges longer than this (sandbox.MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

StatusOr<int64_t> IndexArg(const Value& v) {
  if (!v.is_integral()) {
    return InvalidArgumentError("'" + v.TypeName() +
                                "' object cannot be interpreted as an integer");
  }
  return v.int_value();
}

StatusOr<Value> Range(Interpreter&, const Value&, const std::string&, const CallArgs& args) {
  if (!args.keyword.empty()) return InvalidArgumentError("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) {
    return InvalidArgumentError("range expected at most 3 arguments, got " +
                                std::to_string(p.size()));
  }
  int64_t start = 0, stop = 0, step = 1;
  if (p.size() == 1) {
    ASSIGN_OR_RETURN(stop, IndexArg(p[0]));
  } else {
    ASSIGN_OR_RETURN(start, IndexArg(p[0]));
    ASSIGN_OR_RETURN(stop, IndexArg(p[1]));
    if (p.size() == 3) {
      ASSIGN_OR_RETURN(step, IndexArg(p[2]));
    }
  }
  if (step == 0) return InvalidArgumentError("range() arg 3 must not be zero");
  // Count without overflow: the bounds can be anywhere in int64.
  __int128 span =
      step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  __int128 mag = step > 0 ? step : -static_cast<__int128>(step);
  __int128 count = span <= 0 ? 0 : (span + mag - 1) / mag;
  if (count > kMaxRange) {
    return OutOfRangeError(
        "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(count));
  for (__int128 i = 0; i < count; ++i)
    out.push_back(Value::Int(static_cast<int64_t>(start + i * step)));
  return Value::List(std::move(out));
}

// dict(mapping_or_pairs, **kwargs), Python's builtin.
StatusOr<ValueDict> BuildDict(const CallArgs& args, const char* name) {
  if (args.positional.size() > 1) {
    return InvalidArgumentError(std::string(name) + " expected at most 1 argument, got " +
                                std::to_string(args.positional.size()));
  }
  ValueDict dict;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      dict = src.dict();
    } else {
      ASSIGN_OR_RETURN(std::vector<Value> pairs, PyIterate(src));
      for (const Value& pair : pairs) {
        ASSIGN_OR_RETURN(std::vector<Value> kv, PyIterate(pair));
        if (kv.size() != 2) {
          return InvalidArgumentError("dictionary update sequence element has length " +
                                      std::to_string(kv.size()) + "; 2 is required");
        }
        RETURN_IF_ERROR(dict.Set(kv[0], kv[1]));
      }
    }
  }
  for (const auto& [key, value] : args.keyword) dict.SetString(key, value);
  return dict;
}

StatusOr<Value> Dict(Interpreter&, const Value&, const std::string&, const CallArgs& args) {
  ASSIGN_OR_RETURN(ValueDict dict, BuildDict(args, "dict"));
  return Value::Dict(std::move(dict));
}

StatusOr<Value> MakeNamespace(Interpreter& interp, const Value&, const std::string&,
                              const CallArgs& args) {
  ASSIGN_OR_RETURN(ValueDict dict, BuildDict(args, "namespace"));
  auto ns = interp.NewNamespace();
  for (const auto& [key, value] : dict.entries()) {
    if (!key.is_string()) return InvalidArgumentError("keywords must be strings");
    RETURN_IF_ERROR(ns->SetAttr(key.str(), value));
  }
  return Value::FromObject(std::move(ns));
}

StatusOr<Value> RaiseException(Interpreter& interp, const Value&, const std::string&,
                               const CallArgs& args) {
  ASSIGN_OR_RETURN(auto bound, BindArgs("raise_exception", args, {"message"}));
  if (!bound[0]) {
    return InvalidArgumentError("raise_exception() missing 1 required positional argument");
  }
  return interp.RaiseTemplateError(PyStr(*bound[0]));
}

StatusOr<Value> StrftimeNow(Interpreter&, const Value&, const std::string&, const CallArgs& args) {
  ASSIGN_OR_RETURN(auto bound, BindArgs("strftime_now", args, {"format"}));
  if (!bound[0] || !bound[0]->is_string()) {
    return InvalidArgumentError("strftime_now() argument must be str");
  }
  const std::string& fmt = bound[0]->str();
  if (fmt.size() > 256) return InvalidArgumentError("strftime_now() format too long");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[2048];
  // An empty result is ambiguous in C (empty or overflow); both render as "".
  size_t n = std::strftime(buf, sizeof(buf), fmt.c_str(), &local);
  return Value::String(std::string(buf, n));
}

class Cycler : public Object, public std::enable_shared_from_this<Cycler> {
 public:
  explicit Cycler(std::vector<Value> items) : items_(std::move(items)) {}
  std::string TypeName() const override { return "Cycler"; }
  std::optional<Value> GetAttr(std::string_view name) const override {
    if (name == "current") return items_[pos_];
    if (name == "next" || name == "reset") {
      auto self = std::const_pointer_cast<Cycler>(shared_from_this());
      return Value::FromObject(std::make_shared<Method>(std::move(self), name == "next"));
    }
    return std::nullopt;
  }

 private:
  class Method : public Object {
   public:
    Method(std::shared_ptr<Cycler> owner, bool next) : owner_(std::move(owner)), next_(next) {}
    std::string TypeName() const override { return "method"; }
    bool IsCallable() const override { return true; }
    StatusOr<Value> Call(Interpreter&, const CallArgs&) const override {
      if (!next_) {
        owner_->pos_ = 0;
        return Value::None();
      }
      Value v = owner_->items_[owner_->pos_];
      owner_->pos_ = (owner_->pos_ + 1) % owner_->items_.size();
      return v;
    }

   private:
    std::shared_ptr<Cycler> owner_;
    bool next_;
  };

  std::vector<Value> items_;
  size_t pos_ = 0;
};

StatusOr<Value> MakeCycler(Interpreter&, const Value&, const std::string&, const CallArgs& args) {
  if (args.positional.empty()) return InvalidArgumentError("at least one item has to be provided");
  return Value::FromObject(std::make_shared<Cycler>(args.positional));
}

class Joiner : public Object {
 public:
  explicit Joiner(std::string sep) : sep_(std::move(sep)) {}
  std::string TypeName() const override { return "Joiner"; }
  bool IsCallable() const override { return true; }
  StatusOr<Value> Call(Interpreter&, const CallArgs&) const override {
    if (!used_) {
      used_ = true;
      return Value::String("");
    }
    return Value::String(sep_);
  }

 private:
  std::string sep_;
  mutable bool used_ = false;
};

StatusOr<Value> MakeJoiner(Interpreter&, const Value&, const std::string&, const CallArgs& args) {
  ASSIGN_OR_RETURN(auto bound, BindArgs("joiner", args, {"sep"}));
  return Value::FromObject(std::make_shared<Joiner>(bound[0] ? PyStr(*bound[0]) : ", "));
}

}  // namespace

StatusOr<std::vector<std::optional<Value>>> BindArgs(
    std::string_view function, const CallArgs& args,
    std::initializer_list<std::string_view> params) {
  std::vector<std::optional<Value>> out(params.size());
  if (args.positional.size() > params.size()) {
    return InvalidArgumentError(std::string(function) + "() takes at most " +
                                std::to_string(params.size()) + " argument(s) (" +
                                std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) out[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    for (std::string_view p : params) {
      if (p == key) break;
      ++i;
    }
    if (i == params.size()) {
      return InvalidArgumentError(std::string(function) +
                                  "() got an unexpected keyword argument '" + key + "'");
    }
    if (out[i]) {
      return InvalidArgumentError(std::string(function) + "() got multiple values for argument '" +
                                  key + "'");
    }
    out[i] = value;
  }
  return out;
}

std::string Namespace::Repr() const {
  // Namespaces can contain each other (or themselves) without bound; Python's repr guards
  // against the recursion, so must we.
  thread_local int depth = 0;
  if (depth >= 32) return "<Namespace {...}>";
  ++depth;
  std::string out = "<Namespace " + PyRepr(Value::Dict(attrs_)) + ">";
  --depth;
  return out;
}

std::optional<Value> Namespace::GetAttr(std::string_view name) const {
  if (const Value* v = attrs_.FindString(name)) return *v;
  return std::nullopt;
}

Status Namespace::SetAttr(const std::string& name, Value value) {
  attrs_.SetString(name, std::move(value));
  return Status::Ok();
}

std::optional<Value> LookupGlobal(std::string_view name) {
  struct Entry {
    std::string_view name;
    NativeFunction::Fn fn;
  };
  static const Entry kGlobals[] = {
      {"range", Range},
      {"dict", Dict},
      {"namespace", MakeNamespace},
      {"cycler", MakeCycler},
      {"joiner", MakeJoiner},
      {"raise_exception", RaiseException},
      {"strftime_now", StrftimeNow},
  };
  for (const Entry& e : kGlobals) {
    if (e.name == name) {
      return Value::FromObject(std::make_shared<NativeFunction>(std::string(name), Value(), e.fn));
    }
  }
  return std::nullopt;
}

}  // namespace pagellm::jinja
