#include "tokenizer/base_tokenizer.h"

namespace pagellm {

std::vector<int32_t> BaseTokenizer::Encode(std::string_view text, bool add_special,
                                           bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && add_bos_ && bos_id_ >= 0) out.push_back(bos_id_);
  if (added_tokens_.empty()) {
    if (!text.empty()) EncodeText(text, /*at_text_start=*/true, &out);
  } else {
    for (const auto& segment : added_tokens_.Split(text, parse_special)) {
      if (segment.id >= 0) {
        out.push_back(segment.id);
      } else {
        EncodeText(segment.text, segment.text.data() == text.data(), &out);
      }
    }
  }
  if (add_special && add_eos_ && eos_id_ >= 0) out.push_back(eos_id_);
  return out;
}

Status BaseTokenizer::AddToken(int32_t id, std::string content, bool special) {
  // Added tokens extend the vocabulary by a few hundred ids at most; a far-off id is a
  // corrupt file and must not make us allocate gigabytes.
  if (id < 0 || id > vocab_.size() + kMaxAddedIdGap) {
    return InvalidArgumentError("added token id " + std::to_string(id) + " out of range");
  }
  if (content.empty()) return InvalidArgumentError("empty added token content");
  TokenKind kind = special ? TokenKind::kControl : TokenKind::kUserDefined;
  if (vocab_.Contains(id) && vocab_.piece(id) == content) {
    // "<unk>" is listed as a special added token but stays the unknown piece.
    if (special && vocab_.kind(id) == TokenKind::kUnknown) kind = TokenKind::kUnknown;
    vocab_.set_kind(id, kind);
  } else {
    vocab_.Set(id, content, kind);
  }
  added_tokens_.Add(content, id, special);
  return Status::Ok();
}

}  // namespace pagellm
