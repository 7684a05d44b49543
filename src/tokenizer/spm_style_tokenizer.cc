#include "tokenizer/spm_style_tokenizer.h"

#include "base/utf8.h"

namespace pagellm {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Appends `piece` with every "▁" turned into a space.
void AppendUnescaped(std::string_view piece, std::string* out) {
  size_t pos = 0;
  while (true) {
    const size_t hit = piece.find(kMetaSpace, pos);
    if (hit == std::string_view::npos) break;
    out->append(piece.substr(pos, hit - pos));
    out->push_back(' ');
    pos = hit + kMetaSpace.size();
  }
  out->append(piece.substr(pos));
}

}  // namespace

int SpmStyleTokenizer::ParseBytePiece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  const int hi = HexDigit(piece[3]);
  const int lo = HexDigit(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::optional<std::string> SpmStyleTokenizer::TokenBytes(int32_t id) const {
  if (!vocab_.Contains(id)) return std::nullopt;
  const std::string& piece = vocab_.piece(id);
  switch (vocab_.kind(id)) {
    case TokenKind::kControl:
    case TokenKind::kUnknown:
    case TokenKind::kUnused:
      return std::nullopt;
    case TokenKind::kByte: {
      const int b = ParseBytePiece(piece);
      if (b < 0) return std::nullopt;
      return std::string(1, static_cast<char>(b));
    }
    default: {
      std::string bytes;
      AppendUnescaped(piece, &bytes);
      return bytes;
    }
  }
}

std::string SpmStyleTokenizer::DecodeImpl(std::span<const int32_t> ids, bool skip_special,
                                          bool at_text_start) const {
  std::string bytes;
  bool strip = add_dummy_prefix_ && at_text_start;
  for (int32_t id : ids) {
    if (!vocab_.Contains(id)) {
      strip = false;  // not special (IsSpecial is false), so it counts as text
      continue;
    }
    const std::string& piece = vocab_.piece(id);
    switch (vocab_.kind(id)) {
      case TokenKind::kControl:
      case TokenKind::kUnknown:
        if (!skip_special) bytes += piece;
        break;
      case TokenKind::kByte: {
        const int b = ParseBytePiece(piece);
        if (b >= 0) bytes.push_back(static_cast<char>(b));
        strip = false;
        break;
      }
      default: {
        const size_t start = bytes.size();
        AppendUnescaped(piece, &bytes);
        if (strip && bytes.size() > start && bytes[start] == ' ') bytes.erase(start, 1);
        strip = false;
      }
    }
  }
  return RepairUtf8(bytes);
}

}  // namespace pagellm
