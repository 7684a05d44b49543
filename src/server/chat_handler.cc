// POST /v1/chat/completions: messages -> chat template -> tokens (the template writes BOS and
// the other special tokens as text, so they are parsed as special tokens and nothing is added
// again, as vLLM does with add_special_tokens=false) -> the engine.
#include <ctime>

#include "fmt/format.h"
#include "server/chat_tools.h"
#include "server/http_util.h"
#include "server/logprobs_json.h"
#include "server/openai_handlers.h"
#include "server/request_options.h"
#include "server/sse_stream.h"

namespace pagellm {
namespace {

using json = nlohmann::ordered_json;
using OJson = nlohmann::ordered_json;

json ChatLogprobs(const ServingContext& ctx, const std::vector<TokenLogprobEntry>& entries,
                  int num_top, bool as_ids) {
  return {{"content", ChatLogprobsContent(ctx, entries, num_top, as_ids)}};
}

struct ChatStream {
  ServingContext* ctx;
  std::unique_ptr<Generation> gen;
  RequestOptions opts;
  ChatToolOptions tools;
  std::vector<std::unique_ptr<ChatOutput>> outputs;  // per choice
  std::string id;
  int64_t created;
  std::string role;
  std::string echo;
  int num_top = 0;
  int64_t prompt_tokens = 0;
  std::vector<ChoiceResult> results;

  json Chunk(json choices) const {
    return {{"id", id},
            {"object", "chat.completion.chunk"},
            {"created", created},
            {"model", ctx->model_name()},
            {"choices", std::move(choices)}};
  }

  json Usage(int64_t completion, int64_t cached) const {
    return UsageJson(prompt_tokens, completion, cached);
  }

  void Prologue(std::string* out) const {
    // Every choice opens with the role, then (with echo) the echoed text.
    for (size_t k = 0; k < results.size(); ++k) {
      *out += SseEvent(Chunk(json::array({{{"index", k},
                                           {"delta", {{"role", role}, {"content", ""}}},
                                           {"logprobs", nullptr},
                                           {"finish_reason", nullptr}}})));
      if (!echo.empty()) {
        *out += SseEvent(Chunk(json::array({{{"index", k},
                                             {"delta", {{"content", echo}}},
                                             {"logprobs", nullptr},
                                             {"finish_reason", nullptr}}})));
      }
    }
  }

  void OnItem(GenerationItem& item, std::string* out) {
    const int k = item.index;
    const EngineOutput& o = item.output;
    ChoiceResult& r = results[k];
    r.Add(o);
    if (!o.error.empty()) {
      *out += SseEvent(ApiError::BadRequest(o.error).ToJson());
      return;
    }
    if (o.new_text.empty() && o.new_logprobs.empty() && !o.finished) return;
    ChatOutput& parsed = *outputs[k];
    // Without parsers each step is one chunk of content; with them, one chunk per delta
    // (reasoning, content, each tool-call fragment), the step's logprobs and the finish reason
    // on its last.
    std::vector<OJson> deltas;
    if (parsed.passthrough()) {
      deltas.push_back({{"content", o.new_text}});
    } else {
      deltas = parsed.Add(o.new_text);
      if (o.finished) {
        std::vector<OJson> rest = parsed.Finish();
        deltas.insert(deltas.end(), rest.begin(), rest.end());
      }
      // Nothing certain yet (text held back while it may start a marker): no chunk, unless it
      // must carry logprobs or the finish reason.
      if (deltas.empty() && !o.finished && !opts.params.logprobs) return;
      if (deltas.empty()) deltas.push_back({{"content", ""}});
    }
    for (size_t d = 0; d < deltas.size(); ++d) {
      const bool last = d + 1 == deltas.size();
      json choice = {
          {"index", k},
          {"delta", std::move(deltas[d])},
          {"logprobs", opts.params.logprobs && last ? ChatLogprobs(*ctx, o.new_logprobs, num_top,
                                                                   opts.return_tokens_as_token_ids)
                                                    : json(nullptr)},
          {"finish_reason", o.finished && last
                                ? json(parsed.FinishReason(FinishReasonName(o.finish_reason)))
                                : json(nullptr)}};
      if (o.finished && last) choice["stop_reason"] = StopReasonJson(o.stop_reason, opts.params);
      json chunk = Chunk(json::array({std::move(choice)}));
      if (opts.include_usage && opts.continuous_usage_stats)
        chunk["usage"] = Usage(static_cast<int64_t>(r.token_ids.size()), r.num_cached_tokens);
      *out += SseEvent(chunk);
    }
  }

  void Epilogue(std::string* out) const {
    if (!opts.include_usage) return;
    int64_t completion = 0;
    for (const ChoiceResult& r : results) completion += static_cast<int64_t>(r.token_ids.size());
    json chunk = Chunk(json::array());
    chunk["usage"] = Usage(completion, results.empty() ? 0 : results[0].num_cached_tokens);
    *out += SseEvent(chunk);
  }
};

}  // namespace

void HandleChatCompletions(ServingContext& ctx, const httplib::Request& req, httplib::Response& res,
                           Arrival arrival) {
  // Ordered, because templates that dump messages or tools with tojson must see the client's
  // key order (Python dicts keep it).
  auto obody = ParseOrderedJsonObject(req.body);
  if (!obody.ok()) return SendError(res, ApiError::BadRequest(obody.status().message()));
  const nlohmann::json body(*obody);
  if (auto e = ctx.CheckModel(body)) return SendError(res, *e);
  if (ctx.embedder() != nullptr)
    return SendError(res, ApiError::BadRequest("The model does not support Chat Completions API"));
  WarnIgnoredFields(body, Endpoint::kChat);
  auto opts = ParseRequestOptions(body, Endpoint::kChat, ctx);
  if (!opts.ok()) return SendError(res, ApiError::FromStatus(opts.status()));
  auto tools = ParseChatToolOptions(body, ctx, &opts->params);
  if (!tools.ok()) return SendError(res, ApiError::FromStatus(tools.status()));
  auto prompt = ctx.RenderChat(*obody);
  if (!prompt.ok())
    return SendError(res, ApiError::BadRequest(prompt.status().message(), "messages"));
  auto prompt_ids = ctx.Tokenize(*prompt, opts->add_special_tokens, PromptTokenLimit(*opts, ctx));
  if (!prompt_ids.ok())
    return SendError(res, ApiError::BadRequest(prompt_ids.status().message(), "messages"));
  std::vector<std::vector<int32_t>> ids = {std::move(*prompt_ids)};
  TruncatePrompts(&ids, *opts);
  // A constraint (response_format, or the tools' grammar) starts after the reasoning.
  if (opts->params.structured_outputs)
    opts->params.reasoning_boundary = ctx.ReasoningBoundaryFor(ids[0]);
  if (Status st = CheckMaxTokens(body, ids, ctx.max_model_len()); !st.ok())
    return SendError(res, ApiError::BadRequest(st.message(), "max_tokens"));

  // The reply's role: --response-role (default "assistant") after a generation prompt, else
  // the final message's (the model continues that turn).
  const OJson& messages = (*obody)["messages"];
  const OJson& last = messages.back();
  const bool continue_final = body.value("continue_final_message", json(false)) == json(true);
  const json agp = body.value("add_generation_prompt", json(!continue_final));
  std::string role = ctx.config().response_role;
  if (agp == json(false) && last.contains("role") && last["role"].is_string())
    role = last["role"].get<std::string>();
  std::string echo;
  if (opts->echo && last.value("role", OJson("")) == OJson(role) && last.contains("content") &&
      last["content"].is_string())
    echo = last["content"].get<std::string>();
  const int num_top = opts->params.logprobs ? std::max(0, *opts->params.logprobs) : 0;

  std::string engine_id;
  const std::string id =
      ctx.RequestId("chatcmpl", req.get_header_value("X-Request-Id"), body, &engine_id);
  ctx.LogRequest(id, *prompt, ids[0], opts->params);
  const int n = opts->params.n;
  std::unique_ptr<Generation> gen =
      StartOrRespond(ctx, FanOut(engine_id, ids, *opts), n, arrival, res);
  if (!gen) return;
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  const int64_t prompt_tokens = static_cast<int64_t>(ids[0].size());

  if (!opts->stream) {
    std::vector<ChoiceResult> results = gen->Collect();
    if (auto e = ResultError(ctx, results)) return SendError(res, *e);
    json choices = json::array();
    int64_t completion_tokens = 0;
    for (size_t k = 0; k < results.size(); ++k) {
      const ChoiceResult& r = results[k];
      completion_tokens += static_cast<int64_t>(r.token_ids.size());
      OJson message = {{"role", role}, {"content", r.text}, {"tool_calls", json::array()}};
      ChatOutput parsed(ctx, *tools);
      if (!parsed.passthrough()) parsed.Complete(r.text, &message);
      if (!echo.empty())
        message["content"] =
            echo + (message["content"].is_string() ? message["content"].get<std::string>()
                                                   : std::string());
      choices.push_back(
          {{"index", k},
           {"message", std::move(message)},
           {"logprobs", opts->params.logprobs ? ChatLogprobs(ctx, r.logprobs, num_top,
                                                             opts->return_tokens_as_token_ids)
                                              : json(nullptr)},
           {"finish_reason", parsed.FinishReason(r.finish_reason)},
           {"stop_reason", StopReasonJson(r.stop_reason, opts->params)}});
    }
    return SendJson(res, 200,
                    {{"id", id},
                     {"object", "chat.completion"},
                     {"created", created},
                     {"model", ctx.model_name()},
                     {"choices", std::move(choices)},
                     {"usage", UsageJson(prompt_tokens, completion_tokens,
                                         results.empty() ? 0 : results[0].num_cached_tokens)},
                     {"prompt_logprobs", opts->return_prompt_logprobs && !results.empty()
                                             ? PromptLogprobsJson(ctx, results[0].prompt_logprobs)
                                             : json(nullptr)}});
  }

  auto stream = std::make_shared<ChatStream>();
  stream->ctx = &ctx;
  stream->opts = std::move(*opts);
  stream->id = id;
  stream->created = created;
  stream->role = role;
  stream->echo = echo;
  stream->num_top = num_top;
  stream->prompt_tokens = prompt_tokens;
  stream->results.resize(gen->size());
  stream->tools = *tools;
  for (int k = 0; k < gen->size(); ++k)
    stream->outputs.push_back(std::make_unique<ChatOutput>(ctx, stream->tools));
  stream->gen = std::move(gen);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [stream](size_t, httplib::DataSink& sink) {
        SseCallbacks cb;
        cb.prologue = [&](std::string* out) { stream->Prologue(out); };
        cb.on_item = [&](GenerationItem& item, std::string* out) { stream->OnItem(item, out); };
        cb.epilogue = [&](std::string* out) { stream->Epilogue(out); };
        return PumpSse(*stream->gen, sink, cb, stream->id);
      },
      [stream](bool success) {
        if (!success) stream->gen->AbortAll();
      });
}

}  // namespace pagellm
