// SpmStyleTokenizer: decoding shared by the SentencePiece-style tokenizers (libsentencepiece
// models, GGUF "llama" vocabularies, tokenizer.json BPE with a ▁ metaspace and byte fallback):
// "▁" becomes a space, "<0xNN>" pieces become bytes, and the dummy-prefix space of the first
// piece is dropped, as SentencePiece's DecodeIds and Hugging Face's LlamaTokenizer do.
#pragma once

#include <span>
#include <string>

#include "tokenizer/base_tokenizer.h"

namespace pagellm {

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's visible space.
inline constexpr std::string_view kMetaSpace = "\xE2\x96\x81";

class SpmStyleTokenizer : public BaseTokenizer {
 public:
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const override {
    return DecodeImpl(ids, skip_special, /*at_text_start=*/true);
  }
  std::string DecodeContinuation(std::span<const int32_t> ids, bool skip_special) const override {
    return DecodeImpl(ids, skip_special, /*at_text_start=*/false);
  }

  std::optional<std::string> TokenBytes(int32_t id) const override;

  // Whether encoding prepends "▁" to the text; if so decoding drops the first piece's leading
  // space again. Rule for decoding: only the first piece that is not special (control or
  // unknown) loses it; special tokens are written verbatim unless skipped.
  bool add_dummy_prefix() const { return add_dummy_prefix_; }
  void set_add_dummy_prefix(bool v) { add_dummy_prefix_ = v; }

  // Parses "<0xNN>"; -1 if `piece` is not a byte piece.
  static int ParseBytePiece(std::string_view piece);

 protected:
  std::string DecodeImpl(std::span<const int32_t> ids, bool skip_special, bool at_text_start) const;

  bool add_dummy_prefix_ = true;
};

}  // namespace pagellm
