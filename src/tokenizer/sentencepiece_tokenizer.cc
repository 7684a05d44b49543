#include "tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

namespace pagellm {

SentencePieceTokenizer::SentencePieceTokenizer()
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(
    const std::string& path) {
  std::unique_ptr<SentencePieceTokenizer> tok(new SentencePieceTokenizer());
  const auto status = tok->processor_->Load(path);
  if (!status.ok()) {
    return DataLossError("cannot load SentencePiece model " + path + ": " + status.ToString());
  }
  const auto& sp = *tok->processor_;
  const int n = sp.GetPieceSize();
  tok->vocab_.Reserve(n);
  for (int id = 0; id < n; ++id) {
    TokenKind kind = TokenKind::kNormal;
    if (sp.IsControl(id)) {
      kind = TokenKind::kControl;
    } else if (sp.IsUnknown(id)) {
      kind = TokenKind::kUnknown;
    } else if (sp.IsByte(id)) {
      kind = TokenKind::kByte;
    } else if (sp.IsUnused(id)) {
      kind = TokenKind::kUnused;
    }
    tok->vocab_.Set(id, sp.IdToPiece(id), kind);
    // With parse_special, "<s>" or "<unk>" in the text is that token, as in Hugging Face.
    if (kind == TokenKind::kControl || kind == TokenKind::kUnknown) {
      tok->added_tokens_.Add(sp.IdToPiece(id), id, /*special=*/true);
    }
  }
  // The model proto (and so normalizer_spec.add_dummy_prefix) needs protobuf headers we do
  // not have; the flag shows in the encoding of a lone letter instead.
  const std::vector<int> probe = sp.EncodeAsIds("a");
  tok->add_dummy_prefix_ =
      probe.empty() || sp.IsUnknown(probe[0]) || sp.IdToPiece(probe[0]).starts_with(kMetaSpace);
  tok->bos_id_ = sp.bos_id();
  tok->eos_id_ = sp.eos_id();
  tok->add_bos_ = tok->bos_id_ >= 0;
  if (tok->eos_id_ >= 0) tok->stop_ids_ = {tok->eos_id_};
  return tok;
}

void SentencePieceTokenizer::EncodeText(std::string_view text, bool /*at_text_start*/,
                                        std::vector<int32_t>* out) const {
  // Every piece between added tokens gets its own dummy prefix, as in Hugging Face's legacy
  // LlamaTokenizer and llama.cpp.
  std::vector<int> ids;
  if (!processor_->Encode(text, &ids).ok()) return;
  out->insert(out->end(), ids.begin(), ids.end());
}

}  // namespace pagellm
