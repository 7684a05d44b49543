#include "server/serving_context.h"

#include <algorithm>
#include <random>

#include "engine/sampling_params_json.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "server/http_util.h"
#include "spdlog/spdlog.h"

namespace pagellm {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Type checks of the chat template options: a wrong type is the client's error, not a silent
// default.
Status CheckOptionType(const nlohmann::ordered_json& body, const char* key,
                       bool (*ok)(const nlohmann::ordered_json&), const char* want) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null() || ok(*it)) return Status::Ok();
  return InvalidArgumentError(fmt::format("'{}' must be {}", key, want));
}

}  // namespace

StatusOr<std::unique_ptr<ServingContext>> ServingContext::Create(
    const ServerConfig& config, AsyncEngine* engine, EngineMetrics* metrics,
    std::optional<ChatTemplate> chat_template, GenerationDefaults defaults) {
  std::unique_ptr<ServingContext> ctx(
      new ServingContext(config, engine, metrics, std::move(chat_template), std::move(defaults)));
  if (!config.default_chat_template_kwargs.empty()) {
    auto kwargs = nlohmann::ordered_json::parse(config.default_chat_template_kwargs, nullptr,
                                                /*allow_exceptions=*/false);
    if (kwargs.is_discarded() || !kwargs.is_object())
      return InvalidArgumentError("--default-chat-template-kwargs: expected a JSON object");
    ctx->default_template_kwargs_ = std::move(kwargs);
  }
  if (config.enable_auto_tool_choice && config.tool_call_parser.empty())
    return InvalidArgumentError("--enable-auto-tool-choice requires --tool-call-parser");
  if (!config.tool_call_parser.empty()) {
    ASSIGN_OR_RETURN(std::unique_ptr<ToolCallParser> parser,
                     CreateToolCallParser(config.tool_call_parser));
    if (config.enable_auto_tool_choice) ctx->tool_parser_ = std::move(parser);
  }
  if (!config.reasoning_parser.empty()) {
    ASSIGN_OR_RETURN(ReasoningParser parser, ReasoningParser::Create(config.reasoning_parser));
    ctx->reasoning_parser_ = parser;
    // The structured-output constraint starts after the end token. vLLM refuses a tokenizer
    // without the markers as tokens; here the text is still split, and constraints apply from
    // the first token.
    const auto start = ctx->tokenizer().PieceToId(ReasoningParser::kStart);
    const auto end = ctx->tokenizer().PieceToId(ReasoningParser::kEnd);
    if (start && end) {
      ctx->think_start_token_ = *start;
      ctx->think_end_token_ = *end;
    } else {
      spdlog::warn(
          "--reasoning-parser {}: the tokenizer has no {} / {} tokens; reasoning is split from "
          "the text, and structured output is constrained from the first token",
          config.reasoning_parser, ReasoningParser::kStart, ReasoningParser::kEnd);
    }
  }
  if (config.chat_template_content_format != "auto" &&
      config.chat_template_content_format != "string" &&
      config.chat_template_content_format != "openai")
    return InvalidArgumentError(
        fmt::format("--chat-template-content-format {}: expected auto, string or openai",
                    config.chat_template_content_format));
  return ctx;
}

ServingContext::ServingContext(const ServerConfig& config, AsyncEngine* engine,
                               EngineMetrics* metrics, std::optional<ChatTemplate> chat_template,
                               GenerationDefaults defaults)
    : config_(config),
      engine_(engine),
      metrics_(metrics),
      chat_template_(std::move(chat_template)),
      defaults_(std::move(defaults)),
      id_salt_((static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()) {}

std::optional<ReasoningBoundary> ServingContext::ReasoningBoundaryFor(
    const std::vector<int32_t>& prompt) const {
  if (!reasoning_parser_ || think_end_token_ < 0) return std::nullopt;
  ReasoningBoundary b;
  b.end_token = think_end_token_;
  auto last = std::find_if(prompt.rbegin(), prompt.rend(), [&](int32_t id) {
    return id == think_start_token_ || id == think_end_token_;
  });
  const bool closed = last != prompt.rend() && *last == think_end_token_;
  if (reasoning_parser_->starts_in_reasoning()) {
    b.starts_inside = !closed;
  } else {
    b.start_token = think_start_token_;
  }
  return b;
}

int32_t ServingContext::vocab_size() const {
  return engine_->core().model_config().vocab_size;
}

std::optional<ApiError> ServingContext::CheckModel(const nlohmann::json& body) const {
  auto it = body.find("model");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return ApiError::BadRequest("'model' must be a string", "model");
  const std::string name = it->get<std::string>();
  if (name.empty()) return std::nullopt;
  for (const std::string& served : config_.served_model_names)
    if (served == name) return std::nullopt;
  ApiError e = ApiError::NotFound(fmt::format("The model `{}` does not exist.", name));
  e.param = "model";
  return e;
}

StatusOr<std::vector<int32_t>> ServingContext::Tokenize(const std::string& text, bool add_special,
                                                        std::optional<int64_t> max_tokens,
                                                        std::string_view limit_name) const {
  const Tokenizer& tok = tokenizer();
  if (max_tokens) {
    const int64_t probe_tokens = *max_tokens + kTokenMargin;
    const size_t cut_limit = static_cast<size_t>(probe_tokens * kBytesPerTokenProbe);
    if (text.size() > cut_limit) {
      // First a small prefix, to learn this text's bytes per token; then one prefix sized to
      // hold probe_tokens at that density (with a tenth more), at most cut_limit bytes.
      auto prefix_at = [&](size_t cut) {
        while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
        return std::string_view(text.data(), cut);  // ends on a UTF-8 character boundary
      };
      std::string_view prefix = prefix_at(std::min<size_t>(cut_limit, kFirstProbeBytes));
      size_t prefix_tokens = tok.Encode(prefix, add_special, /*parse_special=*/true).size();
      if (static_cast<int64_t>(prefix_tokens) <= probe_tokens && prefix.size() < cut_limit) {
        const double bytes_per_token = static_cast<double>(prefix.size()) /
                                       static_cast<double>(std::max<size_t>(1, prefix_tokens));
        const size_t next = static_cast<size_t>(
            std::min<double>(static_cast<double>(cut_limit),
                             1.1 * bytes_per_token * static_cast<double>(probe_tokens + 1)));
        if (next > prefix.size()) {
          prefix = prefix_at(next);
          prefix_tokens = tok.Encode(prefix, add_special, /*parse_special=*/true).size();
        }
      }
      if (static_cast<int64_t>(prefix_tokens) > probe_tokens)
        return InvalidArgumentError(fmt::format(
            "{}. However, your request has more than {} input tokens (its first {} bytes "
            "alone are {} tokens; the whole text is {} bytes).",
            limit_name.empty()
                ? fmt::format("This model's maximum context length is {} tokens", max_model_len())
                : std::string(limit_name),
            *max_tokens, prefix.size(), prefix_tokens, text.size()));
    }
  }
  std::vector<int32_t> ids = tok.Encode(text, add_special, /*parse_special=*/true);
  if (ids.empty() && add_special && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  return ids;
}

std::string ServingContext::TokenText(int32_t id) const {
  const int32_t ids[1] = {id};
  return tokenizer().DecodeContinuation(ids, /*skip_special=*/false);
}

StatusOr<std::string> ServingContext::RenderChat(const nlohmann::ordered_json& body) const {
  using OJson = nlohmann::ordered_json;
  auto messages = body.find("messages");
  if (messages == body.end() || messages->is_null())
    return InvalidArgumentError("'messages' is required");
  if (!messages->is_array()) return InvalidArgumentError("'messages' must be a list of messages");
  if (messages->empty()) return InvalidArgumentError("'messages' must not be empty");
  auto is_bool = [](const OJson& v) { return v.is_boolean(); };
  auto is_array = [](const OJson& v) { return v.is_array(); };
  auto is_object = [](const OJson& v) { return v.is_object(); };
  RETURN_IF_ERROR(CheckOptionType(body, "add_generation_prompt", is_bool, "a boolean"));
  RETURN_IF_ERROR(CheckOptionType(body, "continue_final_message", is_bool, "a boolean"));
  RETURN_IF_ERROR(CheckOptionType(body, "tools", is_array, "a list of tools"));
  RETURN_IF_ERROR(CheckOptionType(body, "documents", is_array, "a list of documents"));
  RETURN_IF_ERROR(CheckOptionType(body, "chat_template_kwargs", is_object, "an object"));
  // A request's own template, when the server trusts them (--trust-request-chat-template).
  std::optional<ChatTemplate> request_template;
  if (auto it = body.find("chat_template"); it != body.end() && !it->is_null()) {
    if (!config_.trust_request_chat_template)
      return InvalidArgumentError(
          "Chat template is passed with request, but --trust-request-chat-template is not set. "
          "Refused request with untrusted chat template.");
    if (!it->is_string()) return InvalidArgumentError("'chat_template' must be a string");
    auto parsed = ChatTemplate::Parse(it->get<std::string>());
    if (!parsed.ok()) return InvalidArgumentError(parsed.status().message());
    request_template = std::move(*parsed);
  }
  const ChatTemplate* tmpl = request_template ? &*request_template
                             : chat_template_ ? &*chat_template_
                                              : nullptr;
  if (tmpl == nullptr) {
    return InvalidArgumentError(
        "As of transformers v4.44, default chat template is no longer allowed, so you must "
        "provide a chat template if the tokenizer does not define one.");
  }
  auto flag = [&](const char* key) -> std::optional<bool> {
    auto it = body.find(key);
    if (it == body.end() || !it->is_boolean()) return std::nullopt;
    return it->get<bool>();
  };
  const bool continue_final = flag("continue_final_message").value_or(false);
  // vLLM's default is a generation prompt; we let an unset one yield to
  // continue_final_message (only the explicit combination is an error, from the template).
  OJson options = OJson::object();
  options["add_generation_prompt"] = flag("add_generation_prompt").value_or(!continue_final);
  options["continue_final_message"] = continue_final;
  for (const char* key : {"tools", "documents"}) {
    auto it = body.find(key);
    if (it != body.end() && !it->is_null()) options[key] = *it;
  }
  // Template kwargs: the server's defaults, then reasoning_effort (vLLM passes it to the
  // template), then the request's own, which win.
  OJson kwargs = default_template_kwargs_;
  if (auto it = body.find("reasoning_effort"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return InvalidArgumentError("'reasoning_effort' must be a string");
    kwargs["reasoning_effort"] = *it;
  }
  if (auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null())
    for (auto kv = it->begin(); kv != it->end(); ++kv) kwargs[kv.key()] = kv.value();
  if (!kwargs.empty()) options["chat_template_kwargs"] = std::move(kwargs);
  if (config_.chat_template_content_format != "auto")
    options["content_format"] = config_.chat_template_content_format;
  const Tokenizer& tok = tokenizer();
  if (tok.bos_id() >= 0) options["bos_token"] = tok.bos_token();
  if (tok.eos_id() >= 0) options["eos_token"] = tok.eos_token();
  auto rendered = tmpl->Apply(*messages, options);
  if (!rendered.ok()) {
    // Whatever the template raised (raise_exception, a type error, bad messages) is the
    // request's fault as far as the client can tell: a 400 with the template's message.
    return InvalidArgumentError(rendered.status().message());
  }
  return rendered;
}

std::string ServingContext::NewRequestId(const char* prefix) {
  const uint64_t n = id_counter_.fetch_add(1, std::memory_order_relaxed);
  return fmt::format("{}-{:016x}{:016x}", prefix, SplitMix64(id_salt_ ^ n),
                     SplitMix64(id_salt_ + 2 * n + 1));
}

std::string ServingContext::RequestId(const char* prefix, const std::string& header,
                                      const nlohmann::json& body, std::string* engine_id) {
  std::string base = header;
  if (base.empty()) {
    auto it = body.find("request_id");
    if (it != body.end() && it->is_string()) base = it->get<std::string>();
  }
  if (base.empty()) {
    *engine_id = NewRequestId(prefix);
    return *engine_id;
  }
  const std::string id = fmt::format("{}-{}", prefix, base);
  // Clients may send the same id twice; the engine needs distinct ones.
  *engine_id = fmt::format("{}-{}", id, NewRequestId("r"));
  return id;
}

bool ServingContext::TryReserveQueued(int n) {
  if (config_.max_queued_requests <= 0) {
    num_queued_.fetch_add(n, std::memory_order_relaxed);
    return true;
  }
  int current = num_queued_.load(std::memory_order_relaxed);
  do {
    if (current + n > config_.max_queued_requests) return false;
  } while (!num_queued_.compare_exchange_weak(current, current + n, std::memory_order_relaxed));
  return true;
}

void ServingContext::LogRequest(const std::string& id, const std::string& prompt,
                                const std::vector<int32_t>& prompt_ids,
                                const SamplingParams& params) const {
  if (!config_.enable_log_requests) return;
  std::string shown = prompt;
  std::vector<int32_t> shown_ids = prompt_ids;
  if (config_.max_log_len) {
    const size_t limit = static_cast<size_t>(std::max(0, *config_.max_log_len));
    // Cut at a character boundary so the log stays valid UTF-8.
    if (shown.size() > limit) {
      size_t cut = limit;
      while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) --cut;
      shown.resize(cut);
    }
    if (shown_ids.size() > limit) shown_ids.resize(limit);
  }
  spdlog::info("Received request {}: prompt: {}, params: {}, prompt_token_ids: [{}]", id,
               DumpJson(nlohmann::json(shown)), DescribeParams(params), fmt::join(shown_ids, ", "));
}

std::string DescribeParams(const SamplingParams& p) {
  return fmt::format(
      "SamplingParams(n={}, temperature={}, top_p={}, top_k={}, min_p={}, presence_penalty={}, "
      "frequency_penalty={}, repetition_penalty={}, seed={}, stop={}, stop_token_ids=[{}], "
      "ignore_eos={}, max_tokens={}, min_tokens={}, logprobs={}, skip_special_tokens={})",
      p.n, p.temperature, p.top_p, p.top_k, p.min_p, p.presence_penalty, p.frequency_penalty,
      p.repetition_penalty, p.seed ? std::to_string(*p.seed) : "None",
      DumpJson(nlohmann::json(p.stop)), fmt::join(p.stop_token_ids, ", "), p.ignore_eos,
      p.max_tokens ? std::to_string(*p.max_tokens) : "None", p.min_tokens,
      p.logprobs ? std::to_string(*p.logprobs) : "None", p.skip_special_tokens);
}

}  // namespace pagellm
