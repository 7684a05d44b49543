// Tool calling and reasoning on /v1/chat/completions, as vLLM serves them:
//   tool_choice "none" (or no tools): the output is content;
//   "auto" (the default with tools): needs --enable-auto-tool-choice; the output is parsed by
//     --tool-call-parser into tool_calls and the remaining content;
//   "required" / a named function: a grammar built from the functions' parameter schemas
//     forces the calls (a JSON list of {name, parameters}, or the named function's arguments),
//     so the arguments always validate;
//   parallel_tool_calls false: only the first call is returned.
// With --reasoning-parser, <think>...</think> goes to reasoning_content (and reasoning, the
// name newer vLLM uses), and any grammar starts after the reasoning.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "outparse/reasoning_parser.h"
#include "outparse/tool_call_stream.h"
#include "pagellm/sampling_params.h"
#include "server/serving_context.h"

namespace pagellm {

struct ChatToolOptions {
  enum class Choice { kNone, kAuto, kRequired, kNamed };
  Choice choice = Choice::kNone;
  std::string named_function;  // kNamed
  bool parallel_tool_calls = true;
};

// Reads tools, tool_choice and parallel_tool_calls with vLLM's checks and messages (400s);
// for "required" and named choices sets params->structured_outputs to the tools' grammar.
StatusOr<ChatToolOptions> ParseChatToolOptions(const nlohmann::json& body,
                                               const ServingContext& ctx, SamplingParams* params);

// One choice's output turned into message fields, whole or as streamed deltas.
class ChatOutput {
 public:
  ChatOutput(const ServingContext& ctx, const ChatToolOptions& tools);
  // Neither reasoning nor tool calls are parsed: the text is the content, as it comes.
  bool passthrough() const { return !reasoning_ && tool_parser_ == nullptr; }

  // The message's content / tool_calls / reasoning fields for the whole text (into `message`);
  // the finish reason to report for the engine's `finish_reason`.
  void Complete(const std::string& text, nlohmann::ordered_json* message);
  std::string FinishReason(const std::string& engine_reason) const;

  // The delta objects for new text, and at the end for what was held back.
  std::vector<nlohmann::ordered_json> Add(const std::string& text);
  std::vector<nlohmann::ordered_json> Finish();

 private:
  void ContentDeltas(const std::string& content, bool final,
                     std::vector<nlohmann::ordered_json>* out);

  const ChatToolOptions& tools_;
  const std::optional<ReasoningParser>& reasoning_;
  const ToolCallParser* tool_parser_ = nullptr;
  std::unique_ptr<ToolCallParser> forced_parser_;
  std::optional<ReasoningStream> reasoning_stream_;
  std::optional<ToolCallStream> tool_stream_;
  bool tools_called_ = false;
};

}  // namespace pagellm
