#include "tokenizer/vocab.h"

namespace pagellm {

void Vocab::Reserve(size_t n) {
  pieces_.reserve(n);
  kinds_.reserve(n);
  size_t capacity = 16;
  while (capacity < 2 * n) capacity *= 2;
  if (capacity > index_.size()) Rehash(capacity);
}

void Vocab::Rehash(size_t capacity) {
  index_.assign(capacity, -1);
  indexed_ = 0;
  for (int32_t id = 0; id < size(); ++id) {
    if (pieces_[id].empty()) continue;
    const size_t slot = FindSlot(pieces_[id]);
    if (index_[slot] < 0) {
      index_[slot] = id;
      ++indexed_;
    }
  }
}

size_t Vocab::FindSlot(std::string_view piece) const {
  const size_t mask = index_.size() - 1;
  for (size_t i = StringHash()(piece) & mask;; i = (i + 1) & mask) {
    const int32_t id = index_[i];
    if (id < 0 || pieces_[id] == piece) return i;
  }
}

void Vocab::Set(int32_t id, std::string piece, TokenKind kind) {
  if (id >= size()) {
    pieces_.resize(id + 1);
    kinds_.resize(id + 1, TokenKind::kUnused);
  } else if (!pieces_[id].empty() && Find(pieces_[id]) == id) {
    // The id is being renamed (an added token replacing a vocabulary entry): rebuild the
    // index without its old piece. Rare, so a full rebuild is fine.
    pieces_[id].clear();
    Rehash(index_.size());
  }
  pieces_[id] = std::move(piece);
  kinds_[id] = kind;
  if (pieces_[id].empty()) return;
  if (2 * (indexed_ + 1) > index_.size()) Rehash(index_.empty() ? 16 : 2 * index_.size());
  const size_t slot = FindSlot(pieces_[id]);
  if (index_[slot] < 0) {  // the first id of a piece stays the one found
    index_[slot] = id;
    ++indexed_;
  }
}

std::optional<int32_t> Vocab::Find(std::string_view piece) const {
  if (index_.empty()) return std::nullopt;
  const int32_t id = index_[FindSlot(piece)];
  if (id < 0) return std::nullopt;
  return id;
}

}  // namespace pagellm
