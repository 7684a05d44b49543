#include "chat/chat_template.h"

#include <set>
#include <utility>

#include "chat/python_json.h"
#include "chat/python_text.h"

namespace pagellm {
namespace {

using jinja::Body;
using jinja::Expr;
using jinja::ExprKind;
using jinja::Stmt;
using jinja::StmtKind;
using jinja::Value;
using jinja::ValueDict;
using OJson = nlohmann::ordered_json;

// --- content format detection (vLLM's _detect_content_format) -----------------------------------

// Strips filters, tests and slices: `message.content | selectattr(...)` still reads content.
const Expr* Unwrap(const Expr* e) {
  while (e && (e->kind == ExprKind::kFilter || e->kind == ExprKind::kTest ||
               (e->kind == ExprKind::kGetItem && e->args[0]->kind == ExprKind::kSlice))) {
    e = e->target.get();
  }
  return e;
}

bool IsContentAccess(const Expr* e) {
  e = Unwrap(e);
  if (!e) return false;
  if (e->kind == ExprKind::kGetAttr) return e->name == "content";
  if (e->kind == ExprKind::kGetItem) {
    const Expr& key = *e->args[0];
    return key.kind == ExprKind::kConst && key.constant.is_string() &&
           key.constant.str() == "content";
  }
  return false;
}

void CollectContentVars(const Body& body, std::set<std::string>* vars) {
  for (const auto& stmt : body) {
    if (stmt->kind == StmtKind::kSet && stmt->target->kind == ExprKind::kName &&
        IsContentAccess(stmt->expr.get())) {
      vars->insert(stmt->target->name);
    }
    for (const auto& [test, branch] : stmt->branches) CollectContentVars(branch, vars);
    CollectContentVars(stmt->body, vars);
    CollectContentVars(stmt->else_body, vars);
  }
}

bool LoopsOverContent(const Body& body, const std::set<std::string>& vars) {
  for (const auto& stmt : body) {
    if (stmt->kind == StmtKind::kFor) {
      const Expr* it = Unwrap(stmt->expr.get());
      if (IsContentAccess(it) || (it && it->kind == ExprKind::kName && vars.count(it->name))) {
        return true;
      }
    }
    for (const auto& [test, branch] : stmt->branches) {
      if (LoopsOverContent(branch, vars)) return true;
    }
    if (LoopsOverContent(stmt->body, vars) || LoopsOverContent(stmt->else_body, vars)) return true;
  }
  return false;
}

ChatContentFormat DetectContentFormat(const Body& body) {
  std::set<std::string> vars;
  CollectContentVars(body, &vars);
  return LoopsOverContent(body, vars) ? ChatContentFormat::kOpenAI : ChatContentFormat::kString;
}

// --- message normalization (vLLM's parse_chat_messages + _postprocess_messages) --------------

StatusOr<OJson> NormalizeContent(const OJson& content, ChatContentFormat format) {
  std::vector<OJson> parts;
  if (content.is_null()) {
    // No content (an assistant turn with only tool calls): vLLM renders it as no parts.
  } else if (content.is_string()) {
    if (format == ChatContentFormat::kString) return content;
    parts.push_back(OJson{{"type", "text"}, {"text", content}});
  } else if (content.is_array()) {
    for (const OJson& part : content) {
      if (part.is_string()) {
        parts.push_back(OJson{{"type", "text"}, {"text", part}});
        continue;
      }
      if (!part.is_object()) return InvalidArgumentError("message content parts must be objects");
      auto type = part.find("type");
      auto text = part.find("text");
      const bool is_text =
          (type == part.end() || (type->is_string() && *type == "text")) && text != part.end();
      if (is_text) {
        if (!text->is_string()) return InvalidArgumentError("text content part must be a string");
        parts.push_back(OJson{{"type", "text"}, {"text", *text}});
      } else if (format == ChatContentFormat::kOpenAI) {
        parts.push_back(part);
      }
    }
  } else {
    return InvalidArgumentError("message content must be a string, an array of parts or null");
  }
  if (format == ChatContentFormat::kOpenAI) return OJson(parts);
  std::string joined;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) joined += "\n";
    joined += parts[i]["text"].get<std::string>();
  }
  return OJson(joined);
}

StatusOr<OJson> NormalizeMessages(const OJson& messages, ChatContentFormat format) {
  if (!messages.is_array()) return InvalidArgumentError("messages must be an array");
  OJson out = OJson::array();
  for (const OJson& message : messages) {
    if (!message.is_object()) return InvalidArgumentError("each message must be an object");
    auto role = message.find("role");
    if (role == message.end() || !role->is_string()) {
      return InvalidArgumentError("each message needs a string 'role'");
    }
    OJson m = OJson::object();
    m["role"] = *role;
    auto content = message.find("content");
    ASSIGN_OR_RETURN(m["content"],
                     NormalizeContent(content == message.end() ? OJson() : *content, format));
    for (auto it = message.begin(); it != message.end(); ++it) {
      if (it.key() == "role" || it.key() == "content") continue;
      m[it.key()] = it.value();
    }
    // Tool-call arguments arrive as JSON text; templates expect objects (vLLM parses them).
    auto calls = m.find("tool_calls");
    if (*role == "assistant" && calls != m.end() && calls->is_array()) {
      for (OJson& call : *calls) {
        if (!call.is_object()) continue;
        auto fn = call.find("function");
        if (fn == call.end() || !fn->is_object()) continue;
        auto args = fn->find("arguments");
        if (args == fn->end() || !args->is_string()) continue;
        OJson parsed = OJson::parse(args->get<std::string>(), nullptr, false);
        if (parsed.is_discarded()) {
          return InvalidArgumentError("tool call arguments are not valid JSON: " +
                                      args->get<std::string>());
        }
        *args = std::move(parsed);
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

// transformers' continue_final_message: cut the prompt right after the final message text.
StatusOr<std::string> CutAfterFinalMessage(const std::string& rendered,
                                           const OJson& final_content) {
  std::string final_message;
  if (final_content.is_string()) {
    final_message = final_content.get<std::string>();
  } else {
    bool found = false;
    if (final_content.is_array()) {
      for (auto it = final_content.rbegin(); it != final_content.rend(); ++it) {
        if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
          final_message = (*it)["text"].get<std::string>();
          found = true;
          break;
        }
      }
    }
    if (!found) {
      return InvalidArgumentError(
          "continue_final_message is set but we could not find any text to continue in the "
          "final message!");
    }
  }
  const std::string stripped = jinja::PyStrip(final_message, jinja::StripSide::kBoth);
  const std::string lstripped = jinja::PyStrip(final_message, jinja::StripSide::kLeft);
  size_t loc = rendered.rfind(stripped);
  if (loc == std::string::npos) {
    return InvalidArgumentError(
        "continue_final_message is set but the final message does not appear in the chat after "
        "applying the chat template! This can happen if the chat template deletes portions of "
        "the final message. Please verify the chat template and final message in your chat to "
        "ensure they are compatible.");
  }
  if (rendered.compare(loc, lstripped.size(), final_message) == 0 &&
      lstripped.size() == final_message.size()) {
    return rendered.substr(0, loc + lstripped.size());
  }
  return rendered.substr(0, loc + stripped.size());
}

// A special token in tokenizer_config.json is a string or an AddedToken {"content": ...}.
std::optional<std::string> TokenText(const OJson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return std::nullopt;
}

}  // namespace

StatusOr<ChatTemplate> ChatTemplate::Parse(std::string source) {
  auto parsed = jinja::Template::Parse(source);
  if (!parsed.ok()) return parsed.status().WithContext("chat template syntax error");
  ChatContentFormat format = DetectContentFormat(parsed->body());
  return ChatTemplate(std::make_shared<const std::string>(std::move(source)), std::move(*parsed),
                      format);
}

StatusOr<std::string> ChatTemplate::SourceFromTokenizerConfig(const nlohmann::json& config,
                                                              bool has_tools) {
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    return NotFoundError("tokenizer config has no chat_template");
  }
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) return InvalidArgumentError("chat_template must be a string or a list");
  std::optional<std::string> fallback, tool_use;
  for (const auto& entry : *it) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template")) continue;
    if (!entry["name"].is_string() || !entry["template"].is_string()) continue;
    if (entry["name"] == "default") fallback = entry["template"].get<std::string>();
    if (entry["name"] == "tool_use") tool_use = entry["template"].get<std::string>();
  }
  if (has_tools && tool_use) return *tool_use;
  if (fallback) return *fallback;
  return NotFoundError("tokenizer config has no default chat template");
}

StatusOr<std::string> ChatTemplate::Apply(const nlohmann::json& messages,
                                          const nlohmann::json& options) const {
  return Apply(OJson(messages), OJson(options));
}

StatusOr<std::string> ChatTemplate::Apply(const OJson& messages, const OJson& options) const {
  if (!options.is_null() && !options.is_object()) {
    return InvalidArgumentError("chat template options must be an object");
  }
  const OJson opts = options.is_null() ? OJson::object() : options;
  auto flag = [&](const char* key) {
    auto it = opts.find(key);
    return it != opts.end() && it->is_boolean() && it->get<bool>();
  };
  const bool add_generation_prompt = flag("add_generation_prompt");
  const bool continue_final = flag("continue_final_message");
  if (add_generation_prompt && continue_final) {
    return InvalidArgumentError(
        "continue_final_message and add_generation_prompt are not compatible. Use "
        "continue_final_message when you want the model to continue the final message, and "
        "add_generation_prompt when you want to add a header that will prompt it to start a new "
        "assistant message instead.");
  }
  ChatContentFormat format = content_format_;
  if (auto it = opts.find("content_format"); it != opts.end() && it->is_string()) {
    if (*it == "string") format = ChatContentFormat::kString;
    if (*it == "openai") format = ChatContentFormat::kOpenAI;
  }
  ASSIGN_OR_RETURN(OJson normalized, NormalizeMessages(messages, format));
  if (continue_final && normalized.empty()) {
    return InvalidArgumentError("continue_final_message needs at least one message");
  }

  ValueDict context;
  ASSIGN_OR_RETURN(Value msgs, jinja::ValueFromJson(normalized));
  context.SetString("messages", std::move(msgs));
  for (const char* key : {"tools", "documents"}) {
    auto it = opts.find(key);
    Value v = Value::None();
    if (it != opts.end() && !it->is_null()) {
      ASSIGN_OR_RETURN(v, jinja::ValueFromJson(*it));
    }
    context.SetString(key, std::move(v));
  }
  context.SetString("add_generation_prompt", Value::Bool(add_generation_prompt));
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    auto it = opts.find(key);
    if (it == opts.end()) continue;
    if (auto text = TokenText(*it)) context.SetString(key, Value::String(*text));
  }
  if (auto it = opts.find("chat_template_kwargs"); it != opts.end() && !it->is_null()) {
    if (!it->is_object()) return InvalidArgumentError("chat_template_kwargs must be an object");
    for (auto kv = it->begin(); kv != it->end(); ++kv) {
      if (kv.key() == "messages") {
        return InvalidArgumentError("chat_template_kwargs may not override 'messages'");
      }
      ASSIGN_OR_RETURN(Value v, jinja::ValueFromJson(kv.value()));
      context.SetString(kv.key(), std::move(v));
    }
  }

  ASSIGN_OR_RETURN(std::string rendered, template_.Render(context, limits_));
  if (!continue_final) return rendered;
  return CutAfterFinalMessage(rendered, normalized.back()["content"]);
}

}  // namespace pagellm
