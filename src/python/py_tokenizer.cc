#include "python/py_tokenizer.h"

#include <filesystem>

#include "model/gguf_file.h"
#include "python/py_convert.h"
#include "python/py_llm.h"

namespace py = pybind11;

namespace pagellm::python {

PyTokenizer::PyTokenizer(std::shared_ptr<const void> owner, const Tokenizer* tokenizer)
    : owner_(std::move(owner)), tokenizer_(tokenizer) {}

std::shared_ptr<PyTokenizer> PyTokenizer::Load(const std::string& path) {
  StatusOr<std::unique_ptr<Tokenizer>> tok = [&]() -> StatusOr<std::unique_ptr<Tokenizer>> {
    py::gil_scoped_release release;
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return LoadTokenizerFromDir(path);
    if (!std::filesystem::is_regular_file(path, ec))
      return NotFoundError("no such model directory or file: " + path);
    auto gguf = GgufFile::Open(path);
    if (!gguf.ok()) return gguf.status();
    return LoadTokenizerFromGguf(**gguf);
  }();
  if (!tok.ok()) ThrowStatus(tok.status());
  std::shared_ptr<const Tokenizer> owned(std::move(*tok));
  const Tokenizer* raw = owned.get();
  return std::make_shared<PyTokenizer>(std::move(owned), raw);
}

void PyTokenizer::CheckIds(const std::vector<int64_t>& ids) const {
  for (int64_t id : ids)
    if (id < 0 || id >= tokenizer_->vocab_size())
      throw py::value_error("token id " + std::to_string(id) + " is out of vocabulary (size " +
                            std::to_string(tokenizer_->vocab_size()) + ")");
}

std::vector<int32_t> PyTokenizer::Encode(const std::string& text, bool add_special) const {
  return tokenizer_->Encode(text, add_special, /*parse_special=*/true);
}

py::str PyTokenizer::Decode(const std::vector<int64_t>& ids, bool skip_special) const {
  CheckIds(ids);
  const std::vector<int32_t> ids32(ids.begin(), ids.end());
  return Utf8ToStr(tokenizer_->Decode(ids32, skip_special));
}

std::vector<std::string> PyTokenizer::IdsToPieces(const std::vector<int64_t>& ids) const {
  CheckIds(ids);
  std::vector<std::string> pieces;
  for (int64_t id : ids) pieces.push_back(tokenizer_->IdToPiece(static_cast<int32_t>(id)));
  return pieces;
}

std::optional<int32_t> PyTokenizer::PieceToId(const std::string& piece) const {
  return tokenizer_->PieceToId(piece);
}

py::str PyTokenizer::ApplyChatTemplate(const std::string& messages_json,
                                       const std::string& options_json,
                                       const std::string& template_source) const {
  using OJson = nlohmann::ordered_json;
  OJson messages = OJson::parse(messages_json, nullptr, /*allow_exceptions=*/false);
  OJson options = OJson::parse(options_json, nullptr, /*allow_exceptions=*/false);
  if (messages.is_discarded() || !messages.is_array())
    throw py::value_error("conversation must be a list of messages");
  if (options.is_discarded() || !options.is_object())
    throw py::value_error("chat template options must be a dict");
  if (tokenizer_->bos_id() >= 0) options["bos_token"] = tokenizer_->bos_token();
  if (tokenizer_->eos_id() >= 0) options["eos_token"] = tokenizer_->eos_token();
  std::optional<ChatTemplate> given;
  const ChatTemplate* tmpl = nullptr;
  if (!template_source.empty()) {
    auto parsed = ChatTemplate::Parse(template_source);
    if (!parsed.ok()) throw py::value_error("chat_template: " + parsed.status().message());
    given = std::move(*parsed);
    tmpl = &*given;
  } else {
    if (!own_template_) {
      if (tokenizer_->chat_template().empty()) {
        throw py::value_error(
            "As of transformers v4.44, default chat template is no longer allowed, so you must "
            "provide a chat template if the tokenizer does not define one.");
      }
      auto parsed = ChatTemplate::Parse(tokenizer_->chat_template());
      if (!parsed.ok())
        throw py::value_error("the tokenizer's chat template: " + parsed.status().message());
      own_template_ = std::move(*parsed);
    }
    tmpl = &*own_template_;
  }
  StatusOr<std::string> rendered = [&] {
    py::gil_scoped_release release;
    return tmpl->Apply(messages, options);
  }();
  if (!rendered.ok()) throw py::value_error(rendered.status().message());
  return Utf8ToStr(*rendered);
}

}  // namespace pagellm::python
