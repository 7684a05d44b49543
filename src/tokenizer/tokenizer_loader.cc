// LoadTokenizerFromDir: a Hugging Face model directory. The tokenizer comes from
// tokenizer.json (or tokenizer.model), its special-token settings from tokenizer_config.json,
// and the stop ids from generation_config.json / config.json.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>

#include "base/mapped_file.h"
#include "model/model_weights.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {
namespace {

using nlohmann::json;

// The parsed file, or null JSON if the file does not exist.
StatusOr<json> ReadJsonIfExists(const std::string& path) {
  if (!FileExists(path)) return json();
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return DataLossError(path + ": not a JSON object");
  return j;
}

// bos_token / eos_token: a string, an AddedToken object {"content": ...}, or null.
std::optional<std::string> TokenContent(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object()) {
    auto it = j.find("content");
    if (it != j.end() && it->is_string()) return it->get<std::string>();
  }
  return std::nullopt;
}

// eos_token_id / bos_token_id: an int or a list of ints; values that are no token id are
// dropped.
std::vector<int32_t> Ids(const json& j) {
  std::vector<int32_t> ids;
  auto add = [&](const json& v) {
    if (!v.is_number_integer()) return;
    const int64_t id = v.get<int64_t>();
    if (id >= 0 && id <= INT32_MAX) ids.push_back(static_cast<int32_t>(id));
  };
  if (j.is_array()) {
    for (const json& v : j) add(v);
  } else {
    add(j);
  }
  return ids;
}

Status ApplyTokenizerConfig(const json& config, BaseTokenizer* tok) {
  if (auto added = config.find("added_tokens_decoder");
      added != config.end() && added->is_object()) {
    for (const auto& [key, t] : added->items()) {
      int64_t id = -1;
      try {
        id = std::stoll(key);
      } catch (const std::exception&) {
        return DataLossError("added_tokens_decoder key \"" + key + "\" is not an id");
      }
      const auto content = TokenContent(t);
      if (!content || id > INT32_MAX) return DataLossError("bad added token " + key);
      const bool special = t.is_object() && t.value("special", false);
      RETURN_IF_ERROR(tok->AddToken(static_cast<int32_t>(id), *content, special));
    }
  }
  std::optional<std::string> bos_content;
  if (auto it = config.find("bos_token"); it != config.end()) {
    bos_content = TokenContent(*it);
    const auto id = bos_content ? tok->PieceToId(*bos_content) : std::nullopt;
    tok->set_bos_id(id.value_or(-1));
    if (!id) tok->set_add_bos(false);  // bos_token null (Qwen): nothing to add
  }
  if (auto it = config.find("eos_token"); it != config.end()) {
    const auto content = TokenContent(*it);
    const auto id = content ? tok->PieceToId(*content) : std::nullopt;
    tok->set_eos_id(id.value_or(-1));
  }
  if (auto it = config.find("add_bos_token"); it != config.end() && it->is_boolean()) {
    tok->set_add_bos(it->get<bool>() && tok->bos_id() >= 0);
  } else if (bos_content == "<|begin_of_text|>") {
    // Llama-3 ships a ByteLevel-only post-processor in some exports, yet the model expects
    // <|begin_of_text|> first.
    tok->set_add_bos(tok->bos_id() >= 0);
  }
  if (auto it = config.find("add_eos_token"); it != config.end() && it->is_boolean()) {
    tok->set_add_eos(it->get<bool>() && tok->eos_id() >= 0);
  }
  if (auto it = config.find("chat_template"); it != config.end()) {
    if (it->is_string()) {
      tok->set_chat_template(it->get<std::string>());
    } else if (it->is_array()) {
      // A list of {"name", "template"}: the one named "default", else the first.
      for (const json& t : *it) {
        if (!t.is_object() || !t.contains("template") || !t["template"].is_string()) continue;
        if (tok->chat_template().empty() || t.value("name", "") == "default") {
          tok->set_chat_template(t["template"].get<std::string>());
        }
      }
    }
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& dir) {
  const std::string json_path = dir + "/tokenizer.json";
  const std::string model_path = dir + "/tokenizer.model";
  std::unique_ptr<BaseTokenizer> tok;
  if (FileExists(json_path)) {
    auto loaded = LoadHfTokenizerJson(json_path);
    if (loaded.ok()) {
      HfTokenizerJson hf = std::move(loaded).value();
      tok = std::move(hf.tokenizer);
      tok->set_bos_id(hf.template_bos.value_or(-1));
      tok->set_add_bos(hf.template_bos.has_value());
      tok->set_add_eos(hf.template_eos.has_value());
      if (hf.template_eos) tok->set_eos_id(*hf.template_eos);
    } else if (loaded.status().code() != StatusCode::kUnimplemented || !FileExists(model_path)) {
      return loaded.status();
    }
    // A tokenizer.json we cannot run (e.g. a Unigram model) next to a tokenizer.model: use the
    // SentencePiece model, which libsentencepiece runs whatever its type.
  }
  if (tok == nullptr && FileExists(model_path)) {
    ASSIGN_OR_RETURN(tok, SentencePieceTokenizer::Load(model_path));
  }
  if (tok == nullptr) return NotFoundError("no tokenizer.json or tokenizer.model in " + dir);

  ASSIGN_OR_RETURN(json config, ReadJsonIfExists(dir + "/tokenizer_config.json"));
  ASSIGN_OR_RETURN(json generation, ReadJsonIfExists(dir + "/generation_config.json"));
  ASSIGN_OR_RETURN(json model_config, ReadJsonIfExists(dir + "/config.json"));
  try {
    if (config.is_object()) RETURN_IF_ERROR(ApplyTokenizerConfig(config, tok.get()));
    // Ids named by the generation config (else config.json): BOS only where the tokenizer
    // config does not decide it; every EOS id stops generation.
    std::vector<int32_t> eos_ids;
    for (const json* j : {&generation, &model_config}) {
      if (!j->is_object()) continue;
      if (tok->bos_id() < 0 && !config.contains("bos_token") && j->contains("bos_token_id")) {
        const auto ids = Ids((*j)["bos_token_id"]);
        if (!ids.empty() && ids[0] >= 0 && ids[0] < tok->vocab_size()) tok->set_bos_id(ids[0]);
      }
      if (eos_ids.empty() && j->contains("eos_token_id")) eos_ids = Ids((*j)["eos_token_id"]);
    }
    if (tok->eos_id() < 0 && !eos_ids.empty() && eos_ids[0] >= 0 &&
        eos_ids[0] < tok->vocab_size()) {
      tok->set_eos_id(eos_ids[0]);
    }
    std::vector<int32_t> stop_ids;
    if (tok->eos_id() >= 0) stop_ids.push_back(tok->eos_id());
    for (int32_t id : eos_ids) {
      if (id >= 0 && id < tok->vocab_size() &&
          std::find(stop_ids.begin(), stop_ids.end(), id) == stop_ids.end()) {
        stop_ids.push_back(id);
      }
    }
    tok->set_stop_ids(std::move(stop_ids));
  } catch (const json::exception& e) {
    return DataLossError(std::string("bad tokenizer configuration: ") + e.what());
  }
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromDir(const std::string& dir) {
  auto result = Load(dir);
  if (!result.ok()) return result.status().WithContext("tokenizer in " + dir);
  return result;
}

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerForModel(const LoadedModel& model) {
  if (model.gguf != nullptr) return LoadTokenizerFromGguf(*model.gguf);
  return LoadTokenizerFromDir(model.path);
}

}  // namespace pagellm
