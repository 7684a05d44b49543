#include "tokenizer/byte_level_bpe_tokenizer.h"

#include <cstdio>

#include "base/utf8.h"

namespace pagellm {
namespace {

// GPT-2 keeps printable Latin-1 bytes as themselves and moves the other 68 bytes (controls,
// space, DEL, NBSP, soft hyphen) to U+0100 onwards, in byte order, so that every byte is
// spelled by a visible character.
bool PrintableByte(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteAlphabet {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 0x200> to_byte{};  // every code point used is below U+0200
  ByteAlphabet() {
    to_byte.fill(-1);
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      to_cp[b] = PrintableByte(b) ? static_cast<uint32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& Alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

}  // namespace

uint32_t ByteLevelBpeTokenizer::ByteToCodePoint(uint8_t b) {
  return Alphabet().to_cp[b];
}

int ByteLevelBpeTokenizer::CodePointToByte(uint32_t cp) {
  return cp < Alphabet().to_byte.size() ? Alphabet().to_byte[cp] : -1;
}

std::string ByteLevelBpeTokenizer::PieceBytes(std::string_view piece) {
  std::string bytes;
  bytes.reserve(piece.size());
  for (size_t pos = 0; pos < piece.size();) {
    uint32_t cp = 0;
    const size_t len = DecodeUtf8(piece, pos, &cp);
    const int b = len == 0 ? -1 : CodePointToByte(cp);
    if (b < 0) return std::string(piece);
    bytes.push_back(static_cast<char>(b));
    pos += len;
  }
  return bytes;
}

StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> ByteLevelBpeTokenizer::Create(
    Vocab vocab, BpeMergeTable merges, std::vector<std::unique_ptr<RegexSplitter>> pre_tokenizers,
    const Options& options) {
  std::unique_ptr<ByteLevelBpeTokenizer> tok(new ByteLevelBpeTokenizer());
  tok->vocab_ = std::move(vocab);
  tok->merges_ = std::move(merges);
  tok->pre_tokenizers_ = std::move(pre_tokenizers);
  tok->options_ = options;
  for (int b = 0; b < 256; ++b) {
    std::string piece;
    AppendUtf8(ByteToCodePoint(static_cast<uint8_t>(b)), &piece);
    const auto id = tok->vocab_.Find(piece);
    if (!id) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", b);
      return DataLossError(std::string("byte-level BPE vocabulary has no token for byte ") + hex);
    }
    tok->byte_ids_[b] = *id;
  }
  const Vocab& v = tok->vocab_;
  tok->model_size_ = v.size();
  tok->offsets_.reserve(v.size() + 1);
  tok->arena_.reserve(static_cast<size_t>(v.size()) * 6);
  for (int32_t id = 0; id < v.size(); ++id) {
    tok->offsets_.push_back(static_cast<uint32_t>(tok->arena_.size()));
    tok->arena_ += PieceBytes(v.piece(id));
  }
  tok->offsets_.push_back(static_cast<uint32_t>(tok->arena_.size()));
  if (options.ignore_merges) {
    tok->bytes_to_id_.reserve(v.size());
    for (int32_t id = 0; id < v.size(); ++id) {
      if (v.kind(id) != TokenKind::kNormal) continue;
      const std::string_view bytes(tok->arena_.data() + tok->offsets_[id],
                                   tok->offsets_[id + 1] - tok->offsets_[id]);
      tok->bytes_to_id_.emplace(bytes, id);
    }
  }
  return tok;
}

void ByteLevelBpeTokenizer::AppendTokenBytes(int32_t id, std::string* out) const {
  if (id < model_size_ && vocab_.kind(id) == TokenKind::kNormal) {
    out->append(arena_, offsets_[id], offsets_[id + 1] - offsets_[id]);
  } else {
    out->append(PieceBytes(vocab_.piece(id)));
  }
}

std::optional<std::string> ByteLevelBpeTokenizer::TokenBytes(int32_t id) const {
  if (!vocab_.Contains(id) || vocab_.IsSpecial(id) || vocab_.kind(id) == TokenKind::kUnused)
    return std::nullopt;
  std::string bytes;
  AppendTokenBytes(id, &bytes);
  return bytes;
}

std::string ByteLevelBpeTokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (!vocab_.Contains(id) || (skip_special && vocab_.IsSpecial(id))) continue;
    AppendTokenBytes(id, &bytes);
  }
  return RepairUtf8(bytes);
}

void ByteLevelBpeTokenizer::EncodeText(std::string_view text, bool /*at_text_start*/,
                                       std::vector<int32_t>* out) const {
  std::string prefixed;
  if (options_.add_prefix_space && !text.starts_with(' ')) {
    prefixed.reserve(text.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(text);
    text = prefixed;
  }
  BpeMerger merger;
  std::vector<int32_t> ids;
  std::vector<std::string_view> words;
  std::vector<std::string_view> next;
  size_t pos = 0;
  while (pos < text.size()) {
    // The regexes need valid UTF-8 (as Hugging Face's Rust strings are). Split off each
    // invalid byte as a word of its own: it still has a byte token, so nothing is lost.
    size_t end = pos;
    while (end < text.size()) {
      if (static_cast<uint8_t>(text[end]) < 0x80) {
        ++end;
        continue;
      }
      const size_t len = Utf8SequenceLength(text, end);
      if (len == 0) break;
      end += len;
    }
    if (end > pos) {
      words.clear();
      words.push_back(text.substr(pos, end - pos));
      for (const auto& splitter : pre_tokenizers_) {
        next.clear();
        for (std::string_view w : words) splitter->Split(w, &next);
        words.swap(next);
      }
      for (std::string_view w : words) EncodeWord(w, &merger, &ids, out);
      pos = end;
    }
    if (pos < text.size()) {
      EncodeWord(text.substr(pos, 1), &merger, &ids, out);
      ++pos;
    }
  }
}

void ByteLevelBpeTokenizer::EncodeWord(std::string_view word, BpeMerger* merger,
                                       std::vector<int32_t>* ids, std::vector<int32_t>* out) const {
  if (options_.ignore_merges) {
    const auto it = bytes_to_id_.find(word);
    if (it != bytes_to_id_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  ids->clear();
  for (char c : word) ids->push_back(byte_ids_[static_cast<uint8_t>(c)]);
  merger->Merge(merges_, ids);
  out->insert(out->end(), ids->begin(), ids->end());
}

}  // namespace pagellm
