// SentencePieceTokenizer: a SentencePiece model file (tokenizer.model) encoded by
// libsentencepiece, which implements its normalizers (NFKC charsmaps, whitespace handling) and
// both model types (BPE, unigram). Decoding is SpmStyleTokenizer's, so that all
// SentencePiece-style vocabularies decode alike.
#pragma once

#include <memory>
#include <string>

#include "pagellm/status.h"
#include "tokenizer/spm_style_tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace pagellm {

class SentencePieceTokenizer : public SpmStyleTokenizer {
 public:
  // BOS/EOS come from the model; add_bos is on (Llama's default), add_eos off.
  static StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(const std::string& path);
  ~SentencePieceTokenizer() override;

 protected:
  void EncodeText(std::string_view text, bool at_text_start,
                  std::vector<int32_t>* out) const override;

 private:
  SentencePieceTokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace pagellm
