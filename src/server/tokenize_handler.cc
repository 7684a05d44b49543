// POST /tokenize, POST /detokenize, GET /v1/models.
#include <algorithm>
#include <ctime>

#include "fmt/format.h"
#include "server/http_util.h"
#include "server/openai_handlers.h"

namespace pagellm {
namespace {

using json = nlohmann::ordered_json;

std::optional<ApiError> ReadFlag(const nlohmann::json& body, const char* key, bool* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean())
    return ApiError::BadRequest(fmt::format("'{}' must be a boolean", key), key);
  *out = it->get<bool>();
  return std::nullopt;
}

// /tokenize and /detokenize serve texts longer than the context (vLLM answers any length; a
// client may count a document's tokens before splitting it), up to this many tokens, so that one
// request cannot hold gigabytes (ServingContext::Tokenize).
constexpr int64_t kMinTokenizeLimit = 65536;
int64_t TokenizeLimit(const ServingContext& ctx) {
  return std::max<int64_t>(ctx.max_model_len(), kMinTokenizeLimit);
}

}  // namespace

void HandleTokenize(ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto obody = ParseOrderedJsonObject(req.body);
  if (!obody.ok()) return SendError(res, ApiError::BadRequest(obody.status().message()));
  const nlohmann::json body(*obody);
  if (auto e = ctx.CheckModel(body)) return SendError(res, *e);
  const bool has_prompt = body.contains("prompt") && !body["prompt"].is_null();
  const bool has_messages = body.contains("messages") && !body["messages"].is_null();
  if (has_prompt == has_messages)
    return SendError(
        res, ApiError::BadRequest("Exactly one of 'prompt' or 'messages' must be provided."));
  bool return_token_strs = false;
  if (auto e = ReadFlag(body, "return_token_strs", &return_token_strs)) return SendError(res, *e);
  // Completion prompts get BOS like /v1/completions; chat prompts carry it in the template.
  bool add_special = has_prompt;
  if (auto e = ReadFlag(body, "add_special_tokens", &add_special)) return SendError(res, *e);
  std::string text;
  if (has_prompt) {
    if (!body["prompt"].is_string())
      return SendError(res, ApiError::BadRequest("'prompt' must be a string", "prompt"));
    text = body["prompt"].get<std::string>();
  } else {
    auto rendered = ctx.RenderChat(*obody);
    if (!rendered.ok())
      return SendError(res, ApiError::BadRequest(rendered.status().message(), "messages"));
    text = std::move(*rendered);
  }
  const int64_t limit = TokenizeLimit(ctx);
  auto tokenized = ctx.Tokenize(
      text, add_special, limit,
      fmt::format("/tokenize counts at most {} tokens (the larger of max_model_len and {})", limit,
                  kMinTokenizeLimit));
  if (!tokenized.ok())
    return SendError(res, ApiError::BadRequest(tokenized.status().message(),
                                               has_prompt ? "prompt" : "messages"));
  const std::vector<int32_t>& ids = *tokenized;
  json out = {{"count", ids.size()},
              {"max_model_len", ctx.max_model_len()},
              {"tokens", ids},
              {"token_strs", nullptr}};
  if (return_token_strs) {
    json strs = json::array();
    for (int32_t id : ids) strs.push_back(ctx.tokenizer().IdToPiece(id));
    out["token_strs"] = std::move(strs);
  }
  SendJson(res, 200, out);
}

void HandleDetokenize(ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto body = ParseJsonObject(req.body);
  if (!body.ok()) return SendError(res, ApiError::BadRequest(body.status().message()));
  if (auto e = ctx.CheckModel(*body)) return SendError(res, *e);
  auto it = body->find("tokens");
  if (it == body->end() || !it->is_array())
    return SendError(res, ApiError::BadRequest("'tokens' must be a list of token ids", "tokens"));
  if (static_cast<int64_t>(it->size()) > TokenizeLimit(ctx))
    return SendError(
        res, ApiError::BadRequest(fmt::format("/detokenize takes at most {} tokens (the larger of "
                                              "max_model_len and {}), got {}.",
                                              TokenizeLimit(ctx), kMinTokenizeLimit, it->size()),
                                  "tokens"));
  std::vector<int32_t> ids;
  for (const nlohmann::json& v : *it) {
    if (!v.is_number_integer())
      return SendError(res, ApiError::BadRequest("'tokens' must be a list of token ids", "tokens"));
    // Positive literals parse as unsigned; ones past int64 are out of range anyway.
    const int64_t id =
        v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX ? INT64_MAX : v.get<int64_t>();
    if (id < 0 || id >= ctx.tokenizer().vocab_size())
      return SendError(
          res, ApiError::BadRequest(fmt::format("token id {} is out of vocabulary", v.dump()),
                                    "tokens"));
    ids.push_back(static_cast<int32_t>(id));
  }
  SendJson(res, 200, {{"prompt", ctx.tokenizer().Decode(ids, /*skip_special=*/false)}});
}

void HandleModels(ServingContext& ctx, const httplib::Request&, httplib::Response& res) {
  json data = json::array();
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  for (const std::string& name : ctx.config().served_model_names) {
    data.push_back({{"id", name},
                    {"object", "model"},
                    {"created", created},
                    {"owned_by", "pagellm"},
                    {"root", ctx.config().model_path},
                    {"parent", nullptr},
                    {"max_model_len", ctx.max_model_len()}});
  }
  SendJson(res, 200, {{"object", "list"}, {"data", std::move(data)}});
}

}  // namespace pagellm
