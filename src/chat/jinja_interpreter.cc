#include "chat/jinja_interpreter.h"

#include <utility>

#include "chat/jinja_builtins.h"
#include "chat/python_text.h"
#include "chat/value_ops.h"

namespace pagellm::jinja {
namespace {

// A macro, or the `caller` of a call block: template code closed over its defining frame.
class MacroObject : public Object {
 public:
  MacroObject(const Stmt* def, std::shared_ptr<Interpreter::Frame> closure, std::string name)
      : def_(def), closure_(std::move(closure)), name_(std::move(name)) {}
  std::string TypeName() const override { return "Macro"; }
  std::string Repr() const override { return "<Macro '" + name_ + "'>"; }
  std::optional<Value> GetAttr(std::string_view name) const override {
    if (name == "name") return Value::String(name_);
    return std::nullopt;
  }
  bool IsCallable() const override { return true; }
  StatusOr<Value> Call(Interpreter& interp, const CallArgs& args) const override {
    return interp.CallMacro(*def_, closure_, args, name_);
  }

 private:
  const Stmt* def_;
  std::shared_ptr<Interpreter::Frame> closure_;
  std::string name_;
};

// State shared by all iterations of one loop (loop.changed remembers the last value).
struct LoopState {
  std::vector<Value> items;
  int depth = 0;
  const Stmt* stmt = nullptr;
  std::shared_ptr<Interpreter::Frame> frame;  // where the loop statement runs
  std::optional<Value> last_changed;
};

class LoopObject : public Object {
 public:
  LoopObject(std::shared_ptr<LoopState> state, size_t index)
      : state_(std::move(state)), index_(index) {}
  std::string TypeName() const override { return "LoopContext"; }
  std::string Repr() const override {
    return "<LoopContext " + std::to_string(index_ + 1) + "/" +
           std::to_string(state_->items.size()) + ">";
  }
  std::optional<Value> GetAttr(std::string_view name) const override {
    const int64_t i = static_cast<int64_t>(index_);
    const int64_t n = static_cast<int64_t>(state_->items.size());
    if (name == "index") return Value::Int(i + 1);
    if (name == "index0") return Value::Int(i);
    if (name == "revindex") return Value::Int(n - i);
    if (name == "revindex0") return Value::Int(n - i - 1);
    if (name == "first") return Value::Bool(i == 0);
    if (name == "last") return Value::Bool(i == n - 1);
    if (name == "length") return Value::Int(n);
    if (name == "depth") return Value::Int(state_->depth + 1);
    if (name == "depth0") return Value::Int(state_->depth);
    if (name == "previtem") {
      if (i == 0) return Value::Undefined("there is no previous item");
      return state_->items[index_ - 1];
    }
    if (name == "nextitem") {
      if (i + 1 >= n) return Value::Undefined("there is no next item");
      return state_->items[index_ + 1];
    }
    if (name == "cycle" || name == "changed") {
      return Value::FromObject(std::make_shared<LoopMethod>(state_, index_, std::string(name)));
    }
    return std::nullopt;
  }
  bool IsCallable() const override { return true; }
  StatusOr<Value> Call(Interpreter& interp, const CallArgs& args) const override {
    if (!state_->stmt->recursive) {
      return InvalidArgumentError(
          "Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.");
    }
    if (args.positional.size() != 1 || !args.keyword.empty()) {
      return InvalidArgumentError("loop() takes exactly one iterable argument");
    }
    return interp.RunRecursiveLoop(*state_->stmt, state_->frame, args.positional[0],
                                   state_->depth + 1);
  }

 private:
  class LoopMethod : public Object {
   public:
    LoopMethod(std::shared_ptr<LoopState> state, size_t index, std::string name)
        : state_(std::move(state)), index_(index), name_(std::move(name)) {}
    std::string TypeName() const override { return "method"; }
    bool IsCallable() const override { return true; }
    StatusOr<Value> Call(Interpreter& interp, const CallArgs& args) const override {
      if (name_ == "cycle") {
        if (args.positional.empty()) return InvalidArgumentError("no items for cycling given");
        return args.positional[index_ % args.positional.size()];
      }
      Value current = Value::Tuple(args.positional);
      if (state_->last_changed && PyEquals(*state_->last_changed, current)) {
        return Value::Bool(false);
      }
      state_->last_changed = current;
      return Value::Bool(true);
    }

   private:
    std::shared_ptr<LoopState> state_;
    size_t index_;
    std::string name_;
  };

  std::shared_ptr<LoopState> state_;
  size_t index_;
};

}  // namespace

Interpreter::~Interpreter() {
  // Break the cycles templates can build: frames hold macros that hold frames, namespaces
  // can hold themselves.
  for (auto& weak : namespaces_) {
    if (auto ns = weak.lock()) ns->Clear();
  }
  for (auto& weak : frames_) {
    if (auto frame = weak.lock()) {
      frame->vars.clear();
      frame->parent.reset();
    }
  }
}

StatusOr<std::string> Interpreter::Render(const Body& body, const ValueDict& context) {
  context_ = &context;
  frame_ = std::make_shared<Frame>();
  std::string out;
  out_ = &out;
  Status status = Exec(body);
  out_ = nullptr;
  if (!status.ok()) {
    if (raised_) return status;
    if (error_line_ > 0) {
      return Status(status.code(),
                    status.message() + " (template line " + std::to_string(error_line_) + ")");
    }
    return status;
  }
  return out;
}

Status Interpreter::WithLine(Status status, int line) {
  if (!status.ok() && error_line_ == 0) error_line_ = line;
  return status;
}

Status Interpreter::Tick() {
  if (++steps_ > limits_.max_steps) {
    return ResourceExhaustedError("template evaluation exceeded " +
                                  std::to_string(limits_.max_steps) + " steps");
  }
  return Status::Ok();
}

Status Interpreter::RaiseTemplateError(const std::string& message) {
  raised_ = true;
  return InvalidArgumentError(message);
}

std::shared_ptr<Namespace> Interpreter::NewNamespace() {
  auto ns = std::make_shared<Namespace>();
  namespaces_.push_back(ns);
  return ns;
}

Status Interpreter::Emit(std::string_view text) {
  if (out_->size() + text.size() > limits_.max_output_bytes) {
    return ResourceExhaustedError("template output exceeds " +
                                  std::to_string(limits_.max_output_bytes) + " bytes");
  }
  out_->append(text);
  return Status::Ok();
}

Value Interpreter::Lookup(const std::string& name) const {
  for (const Frame* f = frame_.get(); f != nullptr; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  if (const Value* v = context_->FindString(name)) return *v;
  if (auto global = LookupGlobal(name)) return *global;
  return Value::Undefined("'" + name + "' is undefined");
}

// --- statements -------------------------------------------------------------------------------

Status Interpreter::Exec(const Body& body) {
  for (const StmtPtr& stmt : body) {
    RETURN_IF_ERROR(ExecStmt(*stmt));
    if (flow_ != Flow::kNormal) return Status::Ok();
  }
  return Status::Ok();
}

StatusOr<std::string> Interpreter::Capture(const Body& body) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  Status status = Exec(body);
  out_ = saved;
  RETURN_IF_ERROR(status);
  return buffer;
}

Status Interpreter::ExecStmt(const Stmt& stmt) {
  DepthGuard guard(this);
  RETURN_IF_ERROR(guard.Check());
  RETURN_IF_ERROR(Tick());
  switch (stmt.kind) {
    case StmtKind::kText:
      return Emit(stmt.text);
    case StmtKind::kPrint: {
      ASSIGN_OR_RETURN(Value v, Eval(*stmt.expr));
      return WithLine(Emit(PyStr(v)), stmt.line);
    }
    case StmtKind::kIf:
      for (const auto& [test, branch] : stmt.branches) {
        ASSIGN_OR_RETURN(Value cond, Eval(*test));
        if (cond.Truthy()) return Exec(branch);
      }
      return Exec(stmt.else_body);
    case StmtKind::kFor: {
      ASSIGN_OR_RETURN(Value iterable, Eval(*stmt.expr));
      return RunFor(stmt, iterable, 0);
    }
    case StmtKind::kSet: {
      ASSIGN_OR_RETURN(Value v, Eval(*stmt.expr));
      return WithLine(Assign(*stmt.target, v), stmt.line);
    }
    case StmtKind::kSetBlock: {
      ASSIGN_OR_RETURN(std::string text, Capture(stmt.body));
      Value v = Value::String(std::move(text));
      if (stmt.expr) {
        ASSIGN_OR_RETURN(v, ApplyFilterChain(*stmt.expr, v));
      }
      return WithLine(Assign(*stmt.target, v), stmt.line);
    }
    case StmtKind::kMacro: {
      auto macro = std::make_shared<MacroObject>(&stmt, frame_, stmt.name);
      frames_.push_back(frame_);
      frame_->vars[stmt.name] = Value::FromObject(std::move(macro));
      return Status::Ok();
    }
    case StmtKind::kCallBlock: {
      const Expr& call = *stmt.expr;
      ASSIGN_OR_RETURN(Value callee, Eval(*call.target));
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call));
      frames_.push_back(frame_);
      args.keyword.emplace_back(
          "caller", Value::FromObject(std::make_shared<MacroObject>(&stmt, frame_, "caller")));
      auto result = CallValue(callee, args);
      if (!result.ok()) return WithLine(result.status(), stmt.line);
      return Emit(PyStr(*result));
    }
    case StmtKind::kFilterBlock: {
      ASSIGN_OR_RETURN(std::string text, Capture(stmt.body));
      ASSIGN_OR_RETURN(Value v, ApplyFilterChain(*stmt.expr, Value::String(std::move(text))));
      return Emit(PyStr(v));
    }
    case StmtKind::kWith: {
      std::vector<Value> values;
      for (const ExprPtr& e : stmt.values) {
        ASSIGN_OR_RETURN(Value v, Eval(*e));
        values.push_back(std::move(v));
      }
      auto saved = frame_;
      frame_ = std::make_shared<Frame>();
      frame_->parent = saved;
      Status status = Status::Ok();
      for (size_t i = 0; i < values.size() && status.ok(); ++i) {
        status = WithLine(Assign(*stmt.targets[i], values[i]), stmt.line);
      }
      if (status.ok()) status = Exec(stmt.body);
      frame_ = saved;
      return status;
    }
    case StmtKind::kScope:
      return Exec(stmt.body);
    case StmtKind::kBreak:
      flow_ = Flow::kBreak;
      return Status::Ok();
    case StmtKind::kContinue:
      flow_ = Flow::kContinue;
      return Status::Ok();
  }
  return InternalError("unknown statement");
}

Status Interpreter::RunFor(const Stmt& stmt, const Value& iterable, int depth) {
  auto iterated = PyIterate(iterable);
  if (!iterated.ok()) return WithLine(iterated.status(), stmt.line);
  auto state = std::make_shared<LoopState>();
  state->depth = depth;
  state->stmt = &stmt;
  state->frame = frame_;
  auto saved = frame_;
  if (stmt.cond) {
    // The filter sees the loop target but no `loop` variable, as in jinja2.
    for (Value& item : *iterated) {
      RETURN_IF_ERROR(Tick());
      frame_ = std::make_shared<Frame>();
      frame_->parent = saved;
      Status status = WithLine(Assign(*stmt.target, item), stmt.line);
      StatusOr<Value> keep = status.ok() ? Eval(*stmt.cond) : StatusOr<Value>(status);
      frame_ = saved;
      RETURN_IF_ERROR(keep.status());
      if (keep->Truthy()) state->items.push_back(std::move(item));
    }
  } else {
    state->items = std::move(*iterated);
  }
  if (state->items.empty()) {
    frame_ = std::make_shared<Frame>();
    frame_->parent = saved;
    Status status = Exec(stmt.else_body);
    frame_ = saved;
    return status;
  }
  Status status = Status::Ok();
  for (size_t i = 0; i < state->items.size(); ++i) {
    status = Tick();
    if (!status.ok()) break;
    // Each iteration gets a fresh frame: assignments in the body do not carry over to the
    // next iteration or leak out of the loop (jinja2's scoping).
    frame_ = std::make_shared<Frame>();
    frame_->parent = saved;
    status = WithLine(Assign(*stmt.target, state->items[i]), stmt.line);
    if (!status.ok()) break;
    frame_->vars["loop"] = Value::FromObject(std::make_shared<LoopObject>(state, i));
    status = Exec(stmt.body);
    if (!status.ok()) break;
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    flow_ = Flow::kNormal;
  }
  frame_ = saved;
  return status;
}

StatusOr<Value> Interpreter::RunRecursiveLoop(const Stmt& loop, const std::shared_ptr<Frame>& frame,
                                              const Value& iterable, int depth) {
  DepthGuard guard(this);
  RETURN_IF_ERROR(guard.Check());
  auto saved_frame = frame_;
  frame_ = frame;
  std::string buffer;
  std::string* saved_out = out_;
  out_ = &buffer;
  Status status = RunFor(loop, iterable, depth);
  out_ = saved_out;
  frame_ = saved_frame;
  RETURN_IF_ERROR(status);
  return Value::String(std::move(buffer));
}

Status Interpreter::Assign(const Expr& target, const Value& value) {
  if (target.kind == ExprKind::kName) {
    frame_->vars[target.name] = value;
    return Status::Ok();
  }
  if (target.kind == ExprKind::kNSRef) {
    Value ns = Lookup(target.name);
    if (!ns.is_object() || !ns.object()->IsNamespace()) {
      return InvalidArgumentError("cannot assign attribute on non-namespace object");
    }
    return ns.object()->SetAttr(target.attr, value);
  }
  if (target.kind == ExprKind::kTuple) {
    ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(value));
    const size_t want = target.args.size();
    if (items.size() > want) {
      return InvalidArgumentError("too many values to unpack (expected " + std::to_string(want) +
                                  ")");
    }
    if (items.size() < want) {
      return InvalidArgumentError("not enough values to unpack (expected " + std::to_string(want) +
                                  ", got " + std::to_string(items.size()) + ")");
    }
    for (size_t i = 0; i < want; ++i) RETURN_IF_ERROR(Assign(*target.args[i], items[i]));
    return Status::Ok();
  }
  return InvalidArgumentError("cannot assign to this expression");
}

StatusOr<Value> Interpreter::CallMacro(const Stmt& def, const std::shared_ptr<Frame>& closure,
                                       const CallArgs& args, const std::string& macro_name) {
  DepthGuard guard(this);
  RETURN_IF_ERROR(guard.Check());
  auto frame = std::make_shared<Frame>();
  frame->parent = closure;
  const size_t n = def.params.size();
  std::vector<bool> bound(n, false);
  std::vector<Value> varargs;
  ValueDict kwargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < n) {
      frame->vars[def.params[i]] = args.positional[i];
      bound[i] = true;
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    while (i < n && def.params[i] != key) ++i;
    if (i < n) {
      if (bound[i]) {
        return InvalidArgumentError("macro '" + macro_name +
                                    "' got multiple values for argument '" + key + "'");
      }
      frame->vars[key] = value;
      bound[i] = true;
    } else if (key == "caller") {
      frame->vars["caller"] = value;
    } else {
      kwargs.SetString(key, value);
    }
  }
  frame->vars["varargs"] = Value::Tuple(std::move(varargs));
  frame->vars["kwargs"] = Value::Dict(std::move(kwargs));
  auto saved_frame = frame_;
  frame_ = frame;
  // Defaults are evaluated at call time inside the macro's frame, so they may refer to the
  // parameters before them.
  const size_t first_default = n - def.defaults.size();
  Status status = Status::Ok();
  for (size_t i = 0; i < n && status.ok(); ++i) {
    if (bound[i]) continue;
    if (i >= first_default) {
      auto v = Eval(*def.defaults[i - first_default]);
      if (v.ok()) {
        frame->vars[def.params[i]] = *v;
      } else {
        status = v.status();
      }
    } else {
      frame->vars[def.params[i]] =
          Value::Undefined("parameter '" + def.params[i] + "' was not provided");
    }
  }
  std::string buffer;
  std::string* saved_out = out_;
  Flow saved_flow = flow_;
  out_ = &buffer;
  if (status.ok()) status = Exec(def.body);
  out_ = saved_out;
  flow_ = saved_flow;
  frame_ = saved_frame;
  RETURN_IF_ERROR(status);
  return Value::String(std::move(buffer));
}

}  // namespace pagellm::jinja
