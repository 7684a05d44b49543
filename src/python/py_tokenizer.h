// The tokenizer behind pagellm's get_tokenizer(): an engine's tokenizer (kept alive by its
// owner) or one loaded on its own from a model directory or .gguf file, with the model's chat
// template rendered by chat/chat_template.h.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "pybind11/pybind11.h"
#include "tokenizer/tokenizer.h"

namespace pagellm::python {

class PyTokenizer {
 public:
  // Borrows `tokenizer`, which `owner` keeps alive.
  PyTokenizer(std::shared_ptr<const void> owner, const Tokenizer* tokenizer);
  // Loads the tokenizer of a model directory or .gguf file (FileNotFoundError / ValueError).
  static std::shared_ptr<PyTokenizer> Load(const std::string& path);

  // Hugging Face's semantics: special-token text is parsed as those tokens; add_special adds
  // BOS/EOS as the tokenizer config says.
  std::vector<int32_t> Encode(const std::string& text, bool add_special) const;
  // Token ids out of the vocabulary raise ValueError.
  pybind11::str Decode(const std::vector<int64_t>& ids, bool skip_special) const;
  std::vector<std::string> IdsToPieces(const std::vector<int64_t>& ids) const;
  std::optional<int32_t> PieceToId(const std::string& piece) const;
  // Renders `messages_json` (a JSON array of messages) with `options_json` (the template
  // options of chat/chat_template.h) through `template_source`, or the tokenizer's own
  // template when it is empty. ValueError when there is no template or it raises.
  pybind11::str ApplyChatTemplate(const std::string& messages_json, const std::string& options_json,
                                  const std::string& template_source) const;

  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  void CheckIds(const std::vector<int64_t>& ids) const;

  std::shared_ptr<const void> owner_;
  const Tokenizer* tokenizer_;
  // The tokenizer's own template, parsed on first use.
  mutable std::optional<ChatTemplate> own_template_;
};

}  // namespace pagellm::python
