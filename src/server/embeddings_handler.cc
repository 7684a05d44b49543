// POST /v1/embeddings: OpenAI's embeddings API over the pooling runner (server/
// embedding_runner.h). Input: a string, a list of strings, a list of token ids or a list of
// lists of token ids; encoding_format float (default) or base64 (little-endian float32, as
// vLLM and OpenAI send it).
#include <openssl/evp.h>

#include <cstring>
#include <ctime>

#include "fmt/format.h"
#include "server/http_util.h"
#include "server/openai_handlers.h"

namespace pagellm {
namespace {

using json = nlohmann::ordered_json;
using InJson = nlohmann::json;

constexpr const char* kInputShape =
    "'input' must be a string, a list of strings, a list of token ids, or a list of lists of "
    "token ids";

// `max_tokens`: see ServingContext::Tokenize (none when the request truncates its inputs).
StatusOr<std::vector<std::vector<int32_t>>> ParseInput(const InJson& body,
                                                       const ServingContext& ctx, bool add_special,
                                                       std::optional<int64_t> max_tokens) {
  auto it = body.find("input");
  if (it == body.end() || it->is_null()) return InvalidArgumentError("'input' is required");
  std::vector<std::vector<int32_t>> out;
  auto ids_of = [&](const InJson& list) -> Status {
    std::vector<int32_t> ids;
    for (const InJson& v : list) {
      if (!v.is_number_integer()) return InvalidArgumentError(kInputShape);
      // Positive JSON integers parse as unsigned; past int64 they are out of range anyway.
      const int64_t id =
          v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX ? INT64_MAX : v.get<int64_t>();
      if (id < 0 || id >= ctx.vocab_size())
        return InvalidArgumentError(fmt::format("token id {} is out of vocabulary", v.dump()));
      ids.push_back(static_cast<int32_t>(id));
    }
    out.push_back(std::move(ids));
    return Status::Ok();
  };
  if (it->is_string()) {
    ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                     ctx.Tokenize(it->get<std::string>(), add_special, max_tokens));
    out.push_back(std::move(ids));
    return out;
  }
  if (!it->is_array() || it->empty()) return InvalidArgumentError(kInputShape);
  if ((*it)[0].is_number_integer()) {
    RETURN_IF_ERROR(ids_of(*it));
    return out;
  }
  for (const InJson& item : *it) {
    if (item.is_string()) {
      ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                       ctx.Tokenize(item.get<std::string>(), add_special, max_tokens));
      out.push_back(std::move(ids));
    } else if (item.is_array()) {
      RETURN_IF_ERROR(ids_of(item));
    } else {
      return InvalidArgumentError(kInputShape);
    }
  }
  return out;
}

std::string Base64Floats(const std::vector<float>& v) {
  std::string raw(v.size() * sizeof(float), '\0');
  std::memcpy(raw.data(), v.data(), raw.size());  // little-endian hosts only (x86, arm64)
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(raw.data()),
                                static_cast<int>(raw.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

void HandleEmbeddings(ServingContext& ctx, const httplib::Request& req, httplib::Response& res,
                      Arrival) {
  auto body = ParseJsonObject(req.body);
  if (!body.ok()) return SendError(res, ApiError::BadRequest(body.status().message()));
  if (auto e = ctx.CheckModel(*body)) return SendError(res, *e);
  EmbeddingRunner* runner = ctx.embedder();
  if (runner == nullptr)
    return SendError(res, ApiError::BadRequest("The model does not support Embeddings API"));
  std::string format = "float";
  if (auto it = body->find("encoding_format"); it != body->end() && !it->is_null()) {
    if (!it->is_string() || (*it != "float" && *it != "base64"))
      return SendError(res, ApiError::BadRequest("'encoding_format' must be \"float\" or "
                                                 "\"base64\"",
                                                 "encoding_format"));
    format = it->get<std::string>();
  }
  if (auto it = body->find("dimensions"); it != body->end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() != runner->hidden_size())
      return SendError(
          res, ApiError::BadRequest(fmt::format("Model \"{}\" does not support matryoshka "
                                                "representation, changing output dimensions will "
                                                "lead to poor results.",
                                                ctx.model_name()),
                                    "dimensions"));
  }
  bool add_special = true;
  std::optional<bool> normalize;
  for (const char* key : {"add_special_tokens", "normalize"}) {
    auto it = body->find(key);
    if (it == body->end() || it->is_null()) continue;
    if (!it->is_boolean())
      return SendError(res, ApiError::BadRequest(fmt::format("'{}' must be a boolean", key)));
    if (std::strcmp(key, "normalize") == 0) {
      normalize = it->get<bool>();
    } else {
      add_special = it->get<bool>();
    }
  }
  // An input longer than the context is an error unless the request truncates it.
  std::optional<int64_t> max_tokens = ctx.max_model_len();
  if (auto it = body->find("truncate_prompt_tokens"); it != body->end() && !it->is_null())
    max_tokens = std::nullopt;
  auto inputs = ParseInput(*body, ctx, add_special, max_tokens);
  if (!inputs.ok()) return SendError(res, ApiError::BadRequest(inputs.status().message(), "input"));
  if (auto it = body->find("truncate_prompt_tokens"); it != body->end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < -1 || it->get<int64_t>() == 0)
      return SendError(res,
                       ApiError::BadRequest("truncate_prompt_tokens must be -1 or at least 1"));
    const int64_t keep = it->get<int64_t>();
    for (std::vector<int32_t>& ids : *inputs)
      if (keep > 0 && static_cast<int64_t>(ids.size()) > keep)
        ids.erase(ids.begin(), ids.end() - keep);
  }
  ctx.AddLoad(1);
  json data = json::array();
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < inputs->size(); ++i) {
    auto vec = runner->Embed((*inputs)[i], normalize);
    if (!vec.ok()) {
      ctx.AddLoad(-1);
      return SendError(res, ApiError::BadRequest(vec.status().message(), "input"));
    }
    prompt_tokens += static_cast<int64_t>((*inputs)[i].size());
    data.push_back({{"index", i},
                    {"object", "embedding"},
                    {"embedding", format == "base64" ? json(Base64Floats(*vec)) : json(*vec)}});
  }
  ctx.AddLoad(-1);
  std::string engine_id;
  const std::string id =
      ctx.RequestId("embd", req.get_header_value("X-Request-Id"), *body, &engine_id);
  SendJson(res, 200,
           {{"id", id},
            {"object", "list"},
            {"created", static_cast<int64_t>(std::time(nullptr))},
            {"model", ctx.model_name()},
            {"data", std::move(data)},
            {"usage",
             {{"prompt_tokens", prompt_tokens},
              {"total_tokens", prompt_tokens},
              {"completion_tokens", 0},
              {"prompt_tokens_details", nullptr}}}});
}

}  // namespace pagellm
