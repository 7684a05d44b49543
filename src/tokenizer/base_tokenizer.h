// BaseTokenizer: what every vocabulary-based tokenizer shares. It owns the vocabulary and the
// added-token matcher, and implements Encode's outer loop (BOS/EOS, splitting on added tokens);
// subclasses tokenize the plain-text pieces in between and implement Decode.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/special_token_matcher.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace pagellm {

class BaseTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const final;

  int32_t vocab_size() const override { return vocab_.size(); }
  std::string IdToPiece(int32_t id) const override {
    return vocab_.Contains(id) ? vocab_.piece(id) : std::string();
  }
  std::optional<int32_t> PieceToId(std::string_view piece) const override {
    return vocab_.Find(piece);
  }
  bool IsSpecial(int32_t id) const override { return vocab_.IsSpecial(id); }

  // Registers an added token (tokenizer.json added_tokens, tokenizer_config.json
  // added_tokens_decoder, GGUF control/user-defined tokens). A special one becomes a control
  // token matched only with parse_special; a non-special one is always matched as a whole.
  // An id beyond the vocabulary extends it.
  Status AddToken(int32_t id, std::string content, bool special);
  static constexpr int32_t kMaxAddedIdGap = 1 << 20;

  const Vocab& vocab() const { return vocab_; }

 protected:
  // Tokenizes a piece of plain text (never empty). `at_text_start`: the piece starts the
  // input (nothing, not even an added token, precedes it).
  virtual void EncodeText(std::string_view text, bool at_text_start,
                          std::vector<int32_t>* out) const = 0;

  Vocab vocab_;
  SpecialTokenMatcher added_tokens_;
};

}  // namespace pagellm
