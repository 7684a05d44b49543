// POST /v1/completions.
#include <ctime>

#include "fmt/format.h"
#include "server/http_util.h"
#include "server/logprobs_json.h"
#include "server/openai_handlers.h"
#include "server/request_options.h"
#include "server/sse_stream.h"
#include "spdlog/spdlog.h"

namespace pagellm {
namespace {

using json = nlohmann::ordered_json;  // responses, in vLLM's field order
using InJson = nlohmann::json;        // request bodies

struct Prompt {
  std::string text;  // as given, or decoded from token ids (for echo)
  std::vector<int32_t> ids;
};

constexpr const char* kPromptShape =
    "'prompt' must be a string, a list of strings, a list of token ids, or a list of lists of "
    "token ids";

Status ReadTokenIds(const InJson& list, std::vector<int32_t>* ids) {
  for (const InJson& v : list) {
    if (!v.is_number_integer()) return InvalidArgumentError(kPromptShape);
    if (v.is_number_unsigned() ? v.get<uint64_t>() > INT32_MAX
                               : (v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX))
      return InvalidArgumentError(fmt::format("token id {} is out of vocabulary", v.dump()));
    ids->push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return Status::Ok();
}

StatusOr<std::vector<Prompt>> ParsePrompts(const InJson& body, const ServingContext& ctx,
                                           bool add_special, std::optional<int64_t> max_tokens) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return InvalidArgumentError("'prompt' is required");
  std::vector<Prompt> prompts;
  auto from_text = [&](const std::string& text) -> Status {
    ASSIGN_OR_RETURN(std::vector<int32_t> ids, ctx.Tokenize(text, add_special, max_tokens));
    prompts.push_back({text, std::move(ids)});
    return Status::Ok();
  };
  auto from_ids = [&](const InJson& list) -> Status {
    Prompt p;
    RETURN_IF_ERROR(ReadTokenIds(list, &p.ids));
    p.text = ctx.tokenizer().Decode(p.ids, /*skip_special=*/false);
    prompts.push_back(std::move(p));
    return Status::Ok();
  };
  if (it->is_string()) {
    RETURN_IF_ERROR(from_text(it->get<std::string>()));
    return prompts;
  }
  if (!it->is_array()) return InvalidArgumentError(kPromptShape);
  if (it->empty()) return InvalidArgumentError("'prompt' must not be empty");
  const InJson& first = (*it)[0];
  if (first.is_number_integer()) {
    RETURN_IF_ERROR(from_ids(*it));
    return prompts;
  }
  for (const InJson& p : *it) {
    if (first.is_string() && p.is_string()) {
      RETURN_IF_ERROR(from_text(p.get<std::string>()));
    } else if (first.is_array() && p.is_array()) {
      RETURN_IF_ERROR(from_ids(p));
    } else {
      return InvalidArgumentError(kPromptShape);
    }
  }
  return prompts;
}

json ChoiceJson(int index, std::string text, json logprobs, const ChoiceResult* r,
                const SamplingParams& params) {
  const bool finished = r != nullptr && r->finished;
  return {{"index", index},
          {"text", std::move(text)},
          {"logprobs", std::move(logprobs)},
          {"finish_reason", finished ? json(r->finish_reason) : json(nullptr)},
          {"stop_reason", finished ? StopReasonJson(r->stop_reason, params) : json(nullptr)}};
}

// The streaming state of one request: what each choice has sent so far.
struct CompletionStream {
  ServingContext* ctx;
  std::unique_ptr<Generation> gen;
  RequestOptions opts;
  std::string id;
  int64_t created;
  std::vector<Prompt> prompts;
  int n;
  std::vector<ChoiceResult> results;
  std::vector<size_t> chars_sent;
  std::vector<bool> started;

  json Chunk(json choices) const {
    return {{"id", id},
            {"object", "text_completion"},
            {"created", created},
            {"model", ctx->model_name()},
            {"choices", std::move(choices)}};
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
    std::string delta;
    const bool echo_now = opts.echo && !started[k];
    if (echo_now) delta = prompts[k / n].text;
    delta += o.new_text;
    if (delta.empty() && o.new_logprobs.empty() && !o.finished) return;
    started[k] = true;
    json logprobs = nullptr;
    if (opts.params.logprobs) {
      PromptLogprobs prompt;
      if (echo_now) prompt = {prompts[k / n].ids, o.prompt_logprobs};
      logprobs = CompletionLogprobsJson(*ctx, prompt, o.new_logprobs,
                                        opts.return_tokens_as_token_ids, chars_sent[k]);
    }
    chars_sent[k] += Utf8Length(delta);
    json chunk = Chunk(json::array({ChoiceJson(k, std::move(delta), std::move(logprobs),
                                               o.finished ? &r : nullptr, opts.params)}));
    if (opts.include_usage && opts.continuous_usage_stats) {
      chunk["usage"] = UsageJson(static_cast<int64_t>(prompts[k / n].ids.size()),
                                 static_cast<int64_t>(r.token_ids.size()), r.num_cached_tokens);
    }
    *out += SseEvent(chunk);
  }

  void Epilogue(std::string* out) const {
    if (!opts.include_usage) return;
    int64_t prompt = 0, completion = 0, cached = 0;
    for (size_t p = 0; p < prompts.size(); ++p) {
      prompt += static_cast<int64_t>(prompts[p].ids.size());
      cached += results[p * n].num_cached_tokens;
    }
    for (const ChoiceResult& r : results) completion += static_cast<int64_t>(r.token_ids.size());
    json chunk = Chunk(json::array());
    chunk["usage"] = UsageJson(prompt, completion, cached);
    *out += SseEvent(chunk);
  }
};

}  // namespace

void HandleCompletions(ServingContext& ctx, const httplib::Request& req, httplib::Response& res,
                       Arrival arrival) {
  auto body = ParseJsonObject(req.body);
  if (!body.ok()) return SendError(res, ApiError::BadRequest(body.status().message()));
  if (auto e = ctx.CheckModel(*body)) return SendError(res, *e);
  if (ctx.embedder() != nullptr)
    return SendError(res, ApiError::BadRequest("The model does not support Completions API"));
  WarnIgnoredFields(*body, Endpoint::kCompletions);
  auto opts = ParseRequestOptions(*body, Endpoint::kCompletions, ctx);
  if (!opts.ok()) return SendError(res, ApiError::FromStatus(opts.status()));
  auto prompts = ParsePrompts(*body, ctx, opts->add_special_tokens, PromptTokenLimit(*opts, ctx));
  if (!prompts.ok())
    return SendError(res, ApiError::BadRequest(prompts.status().message(), "prompt"));
  const int n = opts->params.n;
  if (static_cast<int64_t>(prompts->size()) * n > ctx.config().max_n) {
    return SendError(res, ApiError::BadRequest(
                              fmt::format("n x the number of prompts must be at most {}, got {}.",
                                          ctx.config().max_n, prompts->size() * n)));
  }
  std::vector<std::vector<int32_t>> ids;
  for (const Prompt& p : *prompts) ids.push_back(p.ids);
  TruncatePrompts(&ids, *opts);
  for (size_t p = 0; p < prompts->size(); ++p) (*prompts)[p].ids = ids[p];
  if (Status st = CheckMaxTokens(*body, ids, ctx.max_model_len()); !st.ok())
    return SendError(res, ApiError::BadRequest(st.message(), "max_tokens"));

  std::string engine_id;
  const std::string id =
      ctx.RequestId("cmpl", req.get_header_value("X-Request-Id"), *body, &engine_id);
  for (size_t p = 0; p < prompts->size(); ++p) {
    ctx.LogRequest(prompts->size() == 1 ? id : fmt::format("{}-{}", id, p), (*prompts)[p].text,
                   (*prompts)[p].ids, opts->params);
  }
  std::unique_ptr<Generation> gen =
      StartOrRespond(ctx, FanOut(engine_id, ids, *opts), n, arrival, res);
  if (!gen) return;
  const int64_t created = static_cast<int64_t>(std::time(nullptr));

  if (!opts->stream) {
    std::vector<ChoiceResult> results = gen->Collect();
    if (auto e = ResultError(ctx, results)) return SendError(res, *e);
    json choices = json::array();
    int64_t prompt_tokens = 0, completion_tokens = 0, cached = 0;
    for (size_t p = 0; p < prompts->size(); ++p) {
      prompt_tokens += static_cast<int64_t>((*prompts)[p].ids.size());
      cached += results[p * n].num_cached_tokens;
    }
    for (size_t k = 0; k < results.size(); ++k) {
      const ChoiceResult& r = results[k];
      const std::string prefix = opts->echo ? (*prompts)[k / n].text : "";
      json logprobs = nullptr;
      if (opts->params.logprobs) {
        PromptLogprobs prompt;
        if (opts->echo) prompt = {(*prompts)[k / n].ids, r.prompt_logprobs};
        logprobs =
            CompletionLogprobsJson(ctx, prompt, r.logprobs, opts->return_tokens_as_token_ids, 0);
      }
      completion_tokens += static_cast<int64_t>(r.token_ids.size());
      json choice =
          ChoiceJson(static_cast<int>(k), prefix + r.text, std::move(logprobs), &r, opts->params);
      choice["prompt_logprobs"] =
          opts->return_prompt_logprobs ? PromptLogprobsJson(ctx, r.prompt_logprobs) : json(nullptr);
      choices.push_back(std::move(choice));
    }
    return SendJson(res, 200,
                    {{"id", id},
                     {"object", "text_completion"},
                     {"created", created},
                     {"model", ctx.model_name()},
                     {"choices", std::move(choices)},
                     {"usage", UsageJson(prompt_tokens, completion_tokens, cached)}});
  }

  auto stream = std::make_shared<CompletionStream>();
  stream->ctx = &ctx;
  stream->opts = std::move(*opts);
  stream->id = id;
  stream->created = created;
  stream->prompts = std::move(*prompts);
  stream->n = n;
  stream->results.resize(gen->size());
  stream->chars_sent.assign(gen->size(), 0);
  stream->started.assign(gen->size(), false);
  stream->gen = std::move(gen);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [stream](size_t, httplib::DataSink& sink) {
        SseCallbacks cb;
        cb.on_item = [&](GenerationItem& item, std::string* out) { stream->OnItem(item, out); };
        cb.epilogue = [&](std::string* out) { stream->Epilogue(out); };
        return PumpSse(*stream->gen, sink, cb, stream->id);
      },
      [stream](bool success) {
        if (!success) stream->gen->AbortAll();
      });
}

std::unique_ptr<Generation> StartOrRespond(ServingContext& ctx, std::vector<EngineRequest> requests,
                                           int n, Arrival arrival, httplib::Response& res) {
  auto gen = Generation::Start(ctx, std::move(requests), n, arrival);
  if (!gen.ok()) {
    SendError(res, ApiError::FromStatus(gen.status()));
    return nullptr;
  }
  return std::move(*gen);
}

std::optional<ApiError> ResultError(const ServingContext& ctx,
                                    const std::vector<ChoiceResult>& results) {
  for (const ChoiceResult& r : results) {
    if (!r.error.empty()) return ApiError::BadRequest(r.error);
  }
  for (const ChoiceResult& r : results) {
    if (r.finish_reason != "abort") continue;
    if (ctx.stopping())
      return ApiError::Unavailable("The server is shutting down; the request was aborted.");
    return ApiError::Internal("The engine aborted the request.");
  }
  return std::nullopt;
}

}  // namespace pagellm
