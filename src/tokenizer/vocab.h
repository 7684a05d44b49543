// Token inventory shared by the tokenizer implementations: id <-> piece and the kind of
// each token.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagellm {

// Numbered like GGUF tokenizer.ggml.token_type (and SentencePiece's piece types).
enum class TokenKind : uint8_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // special tokens: BOS, EOS, <|im_end|>, ...
  kUserDefined = 4,  // added tokens that are not special: always matched as a whole
  kUnused = 5,
  kByte = 6,  // byte-fallback piece <0xNN>
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

class Vocab {
 public:
  // Grows the vocabulary as needed; ids without a piece are unused "" entries. The first id
  // set for a piece is the one PieceToId returns (duplicates happen in converted vocabularies).
  void Set(int32_t id, std::string piece, TokenKind kind);
  void Reserve(size_t n);

  int32_t size() const { return static_cast<int32_t>(pieces_.size()); }
  bool Contains(int32_t id) const { return id >= 0 && id < size(); }
  const std::string& piece(int32_t id) const { return pieces_[id]; }
  TokenKind kind(int32_t id) const { return kinds_[id]; }
  void set_kind(int32_t id, TokenKind kind) { kinds_[id] = kind; }
  std::optional<int32_t> Find(std::string_view piece) const;
  // Control and unknown tokens: the ones Decode(skip_special) drops.
  bool IsSpecial(int32_t id) const {
    return Contains(id) && (kinds_[id] == TokenKind::kControl || kinds_[id] == TokenKind::kUnknown);
  }

 private:
  // Open-addressing piece -> id index holding ids only (the strings live in pieces_): loading
  // a 150K vocabulary with 280K merges does ~1M lookups, and a node-based map is several
  // times slower at that.
  size_t FindSlot(std::string_view piece) const;
  void Rehash(size_t capacity);

  std::vector<std::string> pieces_;
  std::vector<TokenKind> kinds_;
  std::vector<int32_t> index_;  // -1 = empty
  size_t indexed_ = 0;
};

}  // namespace pagellm
