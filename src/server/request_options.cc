#include "server/request_options.h"

#include <algorithm>
#include <set>

#include "engine/sampling_params_json.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace pagellm {
namespace {

using nlohmann::json;

bool IsSet(const json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

Status ReadBool(const json& body, const char* key, bool* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return InvalidArgumentError(fmt::format("'{}' must be a boolean", key));
  *out = it->get<bool>();
  return Status::Ok();
}

Status ReadInt(const json& body, const char* key, int64_t lo, int64_t hi, std::optional<int>* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer())
    return InvalidArgumentError(fmt::format("'{}' must be an integer", key));
  // Positive literals parse as unsigned; anything past int64 is out of range anyway.
  const bool huge = it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX;
  const int64_t v = huge ? INT64_MAX : it->get<int64_t>();
  if (huge || v < lo || v > hi) {
    return InvalidArgumentError(
        fmt::format("'{}' must be in [{}, {}], got {}", key, lo, hi, it->dump()));
  }
  *out = static_cast<int>(v);
  return Status::Ok();
}

// Fields of each endpoint that are read, or knowingly ignored (no warning for those).
const std::set<std::string>& KnownFields(Endpoint endpoint) {
  static const std::set<std::string> common = {
      "model", "frequency_penalty", "logit_bias", "logprobs", "max_tokens", "n", "presence_penalty",
      "seed", "stop", "stream", "stream_options", "temperature", "top_p", "user", "response_format",
      "metadata", "store", "service_tier",
      // vLLM's extra sampling / request parameters.
      "use_beam_search", "top_k", "min_p", "repetition_penalty", "length_penalty", "stop_token_ids",
      "include_stop_str_in_output", "ignore_eos", "min_tokens", "skip_special_tokens",
      "spaces_between_special_tokens", "truncate_prompt_tokens", "allowed_token_ids",
      "prompt_logprobs", "add_special_tokens", "priority", "cache_salt", "request_id",
      "return_tokens_as_token_ids", "guided_json", "guided_regex", "guided_choice",
      "guided_grammar", "guided_decoding_backend", "structured_outputs", "bad_words",
      "guided_whitespace_pattern", "guided_decoding", "grammar", "json_schema",
      "kv_transfer_params", "vllm_xargs", "echo", "max_completion_tokens", "best_of"};
  static const std::set<std::string> completions = [] {
    std::set<std::string> s = common;
    s.insert({"prompt", "suffix"});
    return s;
  }();
  static const std::set<std::string> chat = [] {
    std::set<std::string> s = common;
    s.insert({"messages", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
              "reasoning_effort", "add_generation_prompt", "continue_final_message", "documents",
              "chat_template", "chat_template_kwargs", "mm_processor_kwargs", "modalities", "audio",
              "prediction", "web_search_options"});
    return s;
  }();
  return endpoint == Endpoint::kChat ? chat : completions;
}

Status CheckUnsupported(const json& body, Endpoint endpoint) {
  bool beam = false;
  RETURN_IF_ERROR(ReadBool(body, "use_beam_search", &beam));
  if (beam) return InvalidArgumentError("Beam search is not supported by this server.");
  if (IsSet(body, "allowed_token_ids"))
    return InvalidArgumentError("allowed_token_ids is not supported by this server.");
  if (IsSet(body, "bad_words"))
    return InvalidArgumentError("bad_words is not supported by this server.");
  if (endpoint == Endpoint::kCompletions && IsSet(body, "suffix"))
    return InvalidArgumentError("suffix is not currently supported");
  return Status::Ok();
}

}  // namespace

StatusOr<RequestOptions> ParseRequestOptions(const json& body, Endpoint endpoint,
                                             const ServingContext& ctx) {
  RETURN_IF_ERROR(CheckUnsupported(body, endpoint));
  RequestOptions o;
  SamplingParams defaults = ctx.default_params();
  // Completions default to 16 tokens (OpenAI's and vLLM's default); chat to the context left.
  if (endpoint == Endpoint::kChat) defaults.max_tokens = std::nullopt;
  if (auto it = body.find("logprobs"); it != body.end() && !it->is_null()) {
    if (endpoint == Endpoint::kChat && !it->is_boolean())
      return InvalidArgumentError("'logprobs' must be a boolean");
    if (endpoint == Endpoint::kCompletions && !it->is_number_integer())
      return InvalidArgumentError("'logprobs' must be an integer");
  }
  if (endpoint == Endpoint::kChat && IsSet(body, "top_logprobs")) {
    auto lp = body.find("logprobs");
    if (lp == body.end() || !lp->is_boolean() || !lp->get<bool>())
      return InvalidArgumentError("when using `top_logprobs`, `logprobs` must be set to true.");
  }
  ASSIGN_OR_RETURN(o.params, ParseSamplingParams(body, defaults));
  // The generation config's max_new_tokens caps every request (vLLM's server-wide limit).
  if (const std::optional<int> cap = ctx.max_new_tokens())
    o.params.max_tokens = std::min(o.params.max_tokens.value_or(*cap), *cap);
  RETURN_IF_ERROR(o.params.Validate(ctx.vocab_size(), ctx.engine().core().config().max_logprobs));

  RETURN_IF_ERROR(ReadBool(body, "stream", &o.stream));
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return InvalidArgumentError("'stream_options' must be an object");
    if (!o.stream)
      return InvalidArgumentError("Stream options can only be defined when `stream=True`.");
    RETURN_IF_ERROR(ReadBool(*it, "include_usage", &o.include_usage));
    RETURN_IF_ERROR(ReadBool(*it, "continuous_usage_stats", &o.continuous_usage_stats));
  }
  // --enable-force-include-usage: every stream reports usage at its end.
  if (o.stream && ctx.config().enable_force_include_usage) o.include_usage = true;
  RETURN_IF_ERROR(ReadBool(body, "echo", &o.echo));
  o.return_prompt_logprobs = o.params.prompt_logprobs.has_value();
  // Echoed completions carry logprobs for the prompt's tokens too (vLLM computes them as
  // prompt logprobs of the same width).
  if (endpoint == Endpoint::kCompletions && o.echo && o.params.logprobs)
    o.params.prompt_logprobs = std::max(o.params.prompt_logprobs.value_or(0), *o.params.logprobs);
  o.return_tokens_as_token_ids = ctx.config().return_tokens_as_token_ids;
  RETURN_IF_ERROR(ReadBool(body, "return_tokens_as_token_ids", &o.return_tokens_as_token_ids));
  o.add_special_tokens = endpoint == Endpoint::kCompletions;
  RETURN_IF_ERROR(ReadBool(body, "add_special_tokens", &o.add_special_tokens));

  std::optional<int> best_of;
  RETURN_IF_ERROR(ReadInt(body, "best_of", 1, ctx.config().max_n, &best_of));
  if (best_of && *best_of != o.params.n)
    return InvalidArgumentError("best_of other than n is not supported by this server.");

  std::optional<int> priority;
  RETURN_IF_ERROR(ReadInt(body, "priority", INT32_MIN, INT32_MAX, &priority));
  o.priority = priority.value_or(0);
  if (o.priority != 0 &&
      ctx.engine().core().config().scheduler.policy != SchedulingPolicy::kPriority) {
    return InvalidArgumentError(
        fmt::format("Got priority {} but Priority scheduling is not enabled.", o.priority));
  }
  if (auto it = body.find("cache_salt"); it != body.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>().empty())
      return InvalidArgumentError("Parameter 'cache_salt' must be a non-empty string if provided.");
    o.cache_salt = it->get<std::string>();
  }
  RETURN_IF_ERROR(
      ReadInt(body, "truncate_prompt_tokens", -1, INT32_MAX, &o.truncate_prompt_tokens));
  if (o.truncate_prompt_tokens && *o.truncate_prompt_tokens == 0)
    return InvalidArgumentError("truncate_prompt_tokens must be -1 or at least 1");
  if (o.truncate_prompt_tokens && *o.truncate_prompt_tokens > ctx.max_model_len())
    return InvalidArgumentError(fmt::format(
        "truncate_prompt_tokens value ({}) is greater than max_model_len ({}). Please, select a "
        "smaller truncation size.",
        *o.truncate_prompt_tokens, ctx.max_model_len()));
  if (o.params.n > ctx.config().max_n)
    return InvalidArgumentError(
        fmt::format("n must be at most {}, got {}.", ctx.config().max_n, o.params.n));
  return o;
}

void WarnIgnoredFields(const json& body, Endpoint endpoint) {
  const std::set<std::string>& known = KnownFields(endpoint);
  std::vector<std::string> ignored;
  for (auto it = body.begin(); it != body.end(); ++it)
    if (!known.contains(it.key())) ignored.push_back(it.key());
  if (!ignored.empty())
    spdlog::warn("The following fields were present in the request but ignored: {}",
                 fmt::join(ignored, ", "));
}

std::optional<int64_t> PromptTokenLimit(const RequestOptions& o, const ServingContext& ctx) {
  if (o.truncate_prompt_tokens && *o.truncate_prompt_tokens >= 0) return std::nullopt;
  return static_cast<int64_t>(ctx.max_model_len()) - 1;
}

Status CheckMaxTokens(const json& body, const std::vector<std::vector<int32_t>>& prompts,
                      int32_t max_model_len) {
  std::optional<int64_t> max_tokens;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    auto it = body.find(key);
    if (it != body.end() && it->is_number_integer()) max_tokens = it->get<int64_t>();
    if (max_tokens) break;
  }
  if (!max_tokens) return Status::Ok();
  for (const std::vector<int32_t>& p : prompts) {
    const int64_t input = static_cast<int64_t>(p.size());
    // A prompt that does not fit at all is the engine's error (it names the prompt length).
    if (input >= max_model_len || input + *max_tokens <= max_model_len) continue;
    return InvalidArgumentError(fmt::format(
        "'max_tokens' or 'max_completion_tokens' is too large: {}. This model's maximum context "
        "length is {} tokens and your request has {} input tokens ({} > {} - {}).",
        *max_tokens, max_model_len, input, *max_tokens, max_model_len, input));
  }
  return Status::Ok();
}

void TruncatePrompts(std::vector<std::vector<int32_t>>* prompts, const RequestOptions& o) {
  if (!o.truncate_prompt_tokens || *o.truncate_prompt_tokens < 0) return;  // -1: keep all
  const size_t keep = static_cast<size_t>(*o.truncate_prompt_tokens);
  for (std::vector<int32_t>& p : *prompts)
    if (p.size() > keep) p.erase(p.begin(), p.end() - static_cast<std::ptrdiff_t>(keep));
}

std::vector<EngineRequest> FanOut(const std::string& id,
                                  const std::vector<std::vector<int32_t>>& prompts,
                                  const RequestOptions& o) {
  std::vector<EngineRequest> out;
  const int n = std::max(1, o.params.n);
  const bool single = prompts.size() == 1 && n == 1;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int i = 0; i < n; ++i) {
      EngineRequest r;
      const size_t index = p * n + i;
      r.request_id = single ? id : fmt::format("{}-{}", id, index);
      r.prompt_token_ids = prompts[p];
      r.params = o.params;
      r.params.n = 1;
      if (o.params.seed) r.params.seed = *o.params.seed + static_cast<uint64_t>(i);
      r.priority = o.priority;
      r.cache_salt = o.cache_salt;
      out.push_back(std::move(r));
    }
  }
  return out;
}

nlohmann::ordered_json StopReasonJson(const std::string& stop_reason,
                                      const SamplingParams& params) {
  if (stop_reason.empty()) return nullptr;
  // The engine reports a stop token as its decimal id; a stop string that happens to be all
  // digits is told apart by being one of the request's stop strings.
  const bool digits = std::all_of(stop_reason.begin(), stop_reason.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
  if (digits && stop_reason.size() < 10 &&
      std::find(params.stop.begin(), params.stop.end(), stop_reason) == params.stop.end())
    return std::stoi(stop_reason);
  return stop_reason;
}

nlohmann::ordered_json UsageJson(int64_t prompt_tokens, int64_t completion_tokens,
                                 int64_t cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"completion_tokens", completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

}  // namespace pagellm
