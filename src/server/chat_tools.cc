#include "server/chat_tools.h"

#include "fmt/format.h"
#include "outparse/forced_tool_call_parser.h"

namespace pagellm {
namespace {

using json = nlohmann::json;
using OJson = nlohmann::ordered_json;

constexpr const char* kCorrectUsage =
    "Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`";

// The tools' functions: name and parameters schema (vLLM's default for none: any object).
struct Function {
  std::string name;
  json parameters;
};

StatusOr<std::vector<Function>> ReadFunctions(const json& tools) {
  std::vector<Function> out;
  for (const json& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object())
      return InvalidArgumentError(
          "each tool must be {\"type\": \"function\", \"function\": {...}}");
    const json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string())
      return InvalidArgumentError("each tool's function must have a string 'name'");
    Function fn;
    fn.name = f["name"].get<std::string>();
    const json params = f.value("parameters", json(nullptr));
    if (!params.is_null() && !params.is_object())
      return InvalidArgumentError(
          fmt::format("the parameters of function '{}' must be a JSON Schema object", fn.name));
    fn.parameters = params.is_object() && !params.empty()
                        ? params
                        : json{{"type", "object"}, {"properties", json::object()}};
    out.push_back(std::move(fn));
  }
  return out;
}

// The schema of tool_choice "required": a list of {"name": one of the functions, "parameters":
// its schema}; the functions' $defs move to the root, where their $refs point.
json RequiredSchema(std::vector<Function> functions, bool parallel) {
  json defs = json::object();
  json alternatives = json::array();
  for (Function& f : functions) {
    if (auto it = f.parameters.find("$defs"); it != f.parameters.end() && it->is_object()) {
      defs.update(*it);
      f.parameters.erase("$defs");
    }
    alternatives.push_back({{"type", "object"},
                            {"properties",
                             {{"name", {{"type", "string"}, {"enum", json::array({f.name})}}},
                              {"parameters", f.parameters}}},
                            {"required", json::array({"name", "parameters"})},
                            {"additionalProperties", false}});
  }
  json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", alternatives}}}};
  if (!parallel) schema["maxItems"] = 1;
  if (!defs.empty()) schema["$defs"] = defs;
  return schema;
}

}  // namespace

StatusOr<ChatToolOptions> ParseChatToolOptions(const json& body, const ServingContext& ctx,
                                               SamplingParams* params) {
  ChatToolOptions o;
  const auto tools_it = body.find("tools");
  const bool has_tools = tools_it != body.end() && tools_it->is_array() && !tools_it->empty();
  if (auto it = body.find("parallel_tool_calls"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return InvalidArgumentError("'parallel_tool_calls' must be a boolean");
    o.parallel_tool_calls = it->get<bool>();
  }
  json choice = body.contains("tool_choice") ? body["tool_choice"] : json(nullptr);
  // vLLM: tools without a tool_choice mean "auto".
  if (!body.contains("tool_choice") && has_tools) choice = "auto";
  if (choice.is_null() || choice == "none") return o;
  if (tools_it == body.end() || tools_it->is_null())
    return InvalidArgumentError("When using `tool_choice`, `tools` must be set.");
  if (choice.is_string() && choice == "required" && !has_tools) return o;
  if (!(choice.is_object() || choice == "auto" || choice == "required"))
    return InvalidArgumentError(
        fmt::format("Invalid value for `tool_choice`: {}! Only named tools, \"none\", \"auto\" or "
                    "\"required\" are supported.",
                    choice.is_string() ? choice.get<std::string>() : choice.dump()));
  ASSIGN_OR_RETURN(std::vector<Function> functions, ReadFunctions(*tools_it));
  if (choice == "auto") {
    if (ctx.tool_parser() == nullptr)
      return InvalidArgumentError(
          "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be "
          "set");
    o.choice = ChatToolOptions::Choice::kAuto;
    return o;
  }
  json schema;
  if (choice == "required") {
    o.choice = ChatToolOptions::Choice::kRequired;
    schema = RequiredSchema(functions, o.parallel_tool_calls);
  } else {
    const json function = choice.value("function", json(nullptr));
    if (!function.is_object())
      return InvalidArgumentError(
          fmt::format("Invalid value for `function`: `{}` in `tool_choice`! {}", function.dump(),
                      kCorrectUsage));
    if (!function.contains("name"))
      return InvalidArgumentError(
          fmt::format("Expected field `name` in `function` in `tool_choice`! {}", kCorrectUsage));
    const json& name = function["name"];
    if (!name.is_string() || name.get<std::string>().empty())
      return InvalidArgumentError(fmt::format(
          "Invalid `name` in `function`: `{}` in `tool_choice`! {}", name.dump(), kCorrectUsage));
    o.choice = ChatToolOptions::Choice::kNamed;
    o.named_function = name.get<std::string>();
    auto f = std::find_if(functions.begin(), functions.end(),
                          [&](const Function& fn) { return fn.name == o.named_function; });
    if (f == functions.end())
      return InvalidArgumentError(
          "The tool specified in `tool_choice` does not match any of the specified `tools`");
    schema = f->parameters;
  }
  if (params->structured_outputs.has_value())
    return InvalidArgumentError(
        "tool_choice \"required\" or a named tool cannot be combined with another structured "
        "output constraint (response_format, structured_outputs, guided_*)");
  StructuredOutputs so;
  so.kind = StructuredOutputs::Kind::kJson;
  so.spec = schema.dump();
  params->structured_outputs = std::move(so);
  return o;
}

ChatOutput::ChatOutput(const ServingContext& ctx, const ChatToolOptions& tools)
    : tools_(tools), reasoning_(ctx.reasoning_parser()) {
  switch (tools.choice) {
    case ChatToolOptions::Choice::kNone:
      break;
    case ChatToolOptions::Choice::kAuto:
      tool_parser_ = ctx.tool_parser();
      break;
    case ChatToolOptions::Choice::kRequired:
      forced_parser_ = std::make_unique<RequiredToolCallParser>();
      tool_parser_ = forced_parser_.get();
      break;
    case ChatToolOptions::Choice::kNamed:
      forced_parser_ = std::make_unique<NamedToolCallParser>(tools.named_function);
      tool_parser_ = forced_parser_.get();
      break;
  }
  if (reasoning_) reasoning_stream_.emplace(*reasoning_);
  if (tool_parser_ != nullptr) tool_stream_.emplace(*tool_parser_);
}

void ChatOutput::Complete(const std::string& text, OJson* message) {
  std::string content = text;
  if (reasoning_) {
    const ReasoningSplit split = reasoning_->Split(text, true);
    content = split.content;
    const OJson reasoning = split.reasoning ? OJson(*split.reasoning) : OJson(nullptr);
    (*message)["reasoning"] = reasoning;
    (*message)["reasoning_content"] = reasoning;
    // DeepSeek-R1 style: no answer after the reasoning is a null content.
    if (split.reasoning && content.empty()) {
      (*message)["content"] = nullptr;
      return;
    }
  }
  (*message)["content"] = content;
  if (tool_parser_ == nullptr) return;
  const ToolParse parse = tool_parser_->Parse(content, true);
  if (parse.calls.empty()) return;
  OJson calls = OJson::array();
  for (const ParsedToolCall& c : parse.calls) {
    calls.push_back({{"id", tool_parser_->NewCallId()},
                     {"type", "function"},
                     {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    if (!tools_.parallel_tool_calls) break;
  }
  (*message)["tool_calls"] = std::move(calls);
  // vLLM: forced calls have an empty content, parsed ones what came before them (or null).
  if (tools_.choice != ChatToolOptions::Choice::kAuto)
    (*message)["content"] = "";
  else if (parse.content.empty())
    (*message)["content"] = nullptr;
  else
    (*message)["content"] = parse.content;
  tools_called_ = true;
}

std::string ChatOutput::FinishReason(const std::string& engine_reason) const {
  // OpenAI's (and vLLM's) finish reason is "tool_calls" for parsed and "required" calls, and
  // stays "stop" for a named one.
  if (tools_.choice == ChatToolOptions::Choice::kAuto && tools_called_) return "tool_calls";
  if (tools_.choice == ChatToolOptions::Choice::kRequired && engine_reason == "stop")
    return "tool_calls";
  return engine_reason;
}

void ChatOutput::ContentDeltas(const std::string& content, bool final, std::vector<OJson>* out) {
  if (!tool_stream_) {
    if (!content.empty()) out->push_back({{"content", content}});
    return;
  }
  ToolStreamDelta d = tool_stream_->Add(content);
  if (final) {
    ToolStreamDelta rest = tool_stream_->Finish();
    d.content += rest.content;
    d.calls.insert(d.calls.end(), rest.calls.begin(), rest.calls.end());
  }
  if (!d.content.empty()) out->push_back({{"content", d.content}});
  for (const ToolCallDelta& c : d.calls) {
    if (c.index > 0 && !tools_.parallel_tool_calls) continue;
    tools_called_ = true;
    OJson call = {{"index", c.index}};
    if (!c.id.empty()) {
      call["id"] = c.id;
      call["type"] = "function";
      call["function"] = {{"name", c.name}};
    } else {
      call["function"] = {{"arguments", c.arguments}};
    }
    out->push_back({{"tool_calls", OJson::array({std::move(call)})}});
  }
}

std::vector<OJson> ChatOutput::Add(const std::string& text) {
  std::vector<OJson> out;
  if (!reasoning_stream_) {
    ContentDeltas(text, false, &out);
    return out;
  }
  const ReasoningStream::Delta d = reasoning_stream_->Add(text);
  if (!d.reasoning.empty())
    out.push_back({{"reasoning", d.reasoning}, {"reasoning_content", d.reasoning}});
  ContentDeltas(d.content, false, &out);
  return out;
}

std::vector<OJson> ChatOutput::Finish() {
  std::vector<OJson> out;
  std::string content;
  if (reasoning_stream_) {
    const ReasoningStream::Delta d = reasoning_stream_->Finish();
    if (!d.reasoning.empty())
      out.push_back({{"reasoning", d.reasoning}, {"reasoning_content", d.reasoning}});
    content = d.content;
  }
  if (tool_stream_ || !content.empty()) ContentDeltas(content, true, &out);
  return out;
}

}  // namespace pagellm
