// TokenVocabulary: what the grammar engine knows of a model's vocabulary: the bytes each token
// stands for (byte-level BPE pieces mapped back through the byte alphabet; SentencePiece pieces
// with "▁" as a space and <0xNN> byte-fallback pieces as that byte), which ids a grammar may
// never produce (control / special / unused tokens, ids past the tokenizer in a wider logits
// row) and the EOS ids, which a grammar allows only where it may end.
// The grammar-usable tokens are kept sorted by their bytes: the token-mask walks visit them in
// that order so that consecutive tokens share the parser states of their common prefix (a trie
// walk without a trie, as in xgrammar).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pagellm {

class TokenVocabulary {
 public:
  // token_bytes[id]: nullopt for ids a grammar never produces. mask_size: the width of a logits
  // row (>= token_bytes.size(); ids beyond the tokenizer are never allowed). eos_ids: the ids
  // that end generation.
  TokenVocabulary(std::vector<std::optional<std::string>> token_bytes, int32_t mask_size,
                  std::vector<int32_t> eos_ids);

  int32_t mask_size() const { return mask_size_; }
  // uint64 words of a bitmask over mask_size() ids (bit id % 64 of word id / 64).
  int32_t mask_words() const { return (mask_size_ + 63) / 64; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  // Usable ids (non-empty bytes, not special, not EOS) sorted by their bytes.
  const std::vector<int32_t>& sorted_ids() const { return sorted_; }
  std::string_view bytes(int32_t id) const {
    return std::string_view(arena_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }
  // Bytes of sorted_ids()[k].
  std::string_view sorted_bytes(size_t k) const { return bytes(sorted_[k]); }
  bool usable(int32_t id) const { return id >= 0 && id < mask_size_ && usable_[id]; }
  // Identifies the vocabulary in compile-cache keys.
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  int32_t mask_size_;
  std::vector<int32_t> eos_ids_;
  std::string arena_;
  std::vector<uint32_t> offsets_;  // [ids + 1]
  std::vector<uint8_t> usable_;    // [mask_size]
  std::vector<int32_t> sorted_;
  uint64_t fingerprint_ = 0;
};

}  // namespace pagellm
