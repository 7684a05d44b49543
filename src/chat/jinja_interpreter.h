// Interpreter: renders a parsed template against a context, with jinja2's runtime semantics
// (scoping of for/with/macro frames, Undefined, loop objects, macros and call blocks) as run
// by transformers' ImmutableSandboxedEnvironment. Every failure is a Status; hostile
// templates are bounded in recursion depth, evaluation steps and output size.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"
#include "pagellm/status.h"

namespace pagellm::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;
  // Nested evaluation (expressions, blocks, macro calls). jinja2 stops at Python's recursion
  // limit; this keeps the native stack small even under sanitizers.
  int max_depth = 256;
  // Evaluation steps (one per node evaluated or loop iteration): stops runaway loops.
  uint64_t max_steps = 5'000'000;
};

class Namespace;

class Interpreter {
 public:
  explicit Interpreter(RenderLimits limits) : limits_(limits) {}
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `body` with `context` as the template's variables. Errors raised by the template
  // through raise_exception carry its message unchanged; others name the template line.
  StatusOr<std::string> Render(const Body& body, const ValueDict& context);

  // --- services for the built-in library ---------------------------------------------------
  StatusOr<Value> CallValue(const Value& callee, const CallArgs& args);
  StatusOr<Value> GetAttr(const Value& obj, const std::string& name);
  StatusOr<Value> GetItem(const Value& obj, const Value& key);
  // Counts one evaluation step; fails once the budget is spent.
  Status Tick();
  // The error of raise_exception(message): reported verbatim.
  Status RaiseTemplateError(const std::string& message);
  std::shared_ptr<Namespace> NewNamespace();

  // --- used by macro, caller and loop objects ----------------------------------------------
  struct Frame {
    std::unordered_map<std::string, Value> vars;
    std::shared_ptr<Frame> parent;
  };
  // Runs a macro or call-block body in a fresh frame under `closure` with `args` bound to
  // `def`'s parameters; returns its output.
  StatusOr<Value> CallMacro(const Stmt& def, const std::shared_ptr<Frame>& closure,
                            const CallArgs& args, const std::string& macro_name);
  // Runs a `recursive` for loop's body over `iterable` (loop(...) inside the loop).
  StatusOr<Value> RunRecursiveLoop(const Stmt& loop, const std::shared_ptr<Frame>& frame,
                                   const Value& iterable, int depth);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  // Counts nesting of evaluation; Check() fails past limits_.max_depth.
  class DepthGuard {
   public:
    explicit DepthGuard(Interpreter* interp) : interp_(interp) { ++interp_->depth_; }
    ~DepthGuard() { --interp_->depth_; }
    Status Check() const {
      if (interp_->depth_ <= interp_->limits_.max_depth) return Status::Ok();
      return ResourceExhaustedError("template recursion too deep (limit " +
                                    std::to_string(interp_->limits_.max_depth) + ")");
    }

   private:
    Interpreter* interp_;
  };

  Status Exec(const Body& body);
  Status ExecStmt(const Stmt& stmt);
  StatusOr<std::string> Capture(const Body& body);
  Status RunFor(const Stmt& stmt, const Value& iterable, int depth);
  Status Assign(const Expr& target, const Value& value);
  Status Emit(std::string_view text);

  StatusOr<Value> Eval(const Expr& expr);
  StatusOr<Value> EvalInner(const Expr& expr);
  StatusOr<Value> EvalCompare(const Expr& expr);
  StatusOr<CallArgs> EvalArgs(const Expr& expr);
  // Applies a filter chain whose innermost target is null to `input`.
  StatusOr<Value> ApplyFilterChain(const Expr& chain, const Value& input);
  Value Lookup(const std::string& name) const;
  Status WithLine(Status status, int line);

  RenderLimits limits_;
  const ValueDict* context_ = nullptr;
  std::shared_ptr<Frame> frame_;
  std::string* out_ = nullptr;
  Flow flow_ = Flow::kNormal;
  int depth_ = 0;
  uint64_t steps_ = 0;
  bool raised_ = false;  // the error came from raise_exception
  int error_line_ = 0;   // innermost line of the first error
  std::vector<std::weak_ptr<Namespace>> namespaces_;
  std::vector<std::weak_ptr<Frame>> frames_;
};

}  // namespace pagellm::jinja
