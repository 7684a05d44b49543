// Reader for Hugging Face tokenizer.json files with a BPE model: byte-level (GPT-2, Llama-3,
// Qwen) or SentencePiece-style with a ▁ metaspace and byte fallback (Mistral, Llama-2 HF).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "pagellm/status.h"
#include "tokenizer/base_tokenizer.h"

namespace pagellm {

struct HfTokenizerJson {
  std::unique_ptr<BaseTokenizer> tokenizer;
  // Special tokens the TemplateProcessing post-processor puts before / after a single
  // sequence (e.g. Mistral's "<s>" $A): how Hugging Face decides to add BOS/EOS.
  std::optional<int32_t> template_bos;
  std::optional<int32_t> template_eos;
};

StatusOr<HfTokenizerJson> LoadHfTokenizerJson(const std::string& path);
// `name` appears in error messages.
StatusOr<HfTokenizerJson> ParseHfTokenizerJson(std::string_view json, const std::string& name);

}  // namespace pagellm
