#include "tokenizer/spm_bpe_tokenizer.h"

#include <algorithm>
#include <utility>

#include "base/utf8.h"

namespace pagellm {

SpmBpeTokenizer::SpmBpeTokenizer(Vocab vocab, BpeMergeTable merges, const Options& options)
    : merges_(std::move(merges)), options_(options) {
  vocab_ = std::move(vocab);
  add_dummy_prefix_ = options.add_dummy_prefix;
  byte_ids_.fill(-1);
  for (int32_t id = 0; id < vocab_.size(); ++id) {
    switch (vocab_.kind(id)) {
      case TokenKind::kUnknown:
        if (unk_id_ < 0) unk_id_ = id;
        break;
      case TokenKind::kByte: {
        const int b = ParseBytePiece(vocab_.piece(id));
        if (b >= 0 && byte_ids_[b] < 0) byte_ids_[b] = id;
        break;
      }
      case TokenKind::kUnused:
        has_unused_ = true;
        break;
      default:
        break;
    }
  }
}

BpeMergeTable SpmBpeTokenizer::MergesFromScores(const Vocab& vocab, std::span<const float> scores) {
  std::vector<std::pair<float, int32_t>> by_score;
  for (int32_t id = 0; id < vocab.size() && id < static_cast<int32_t>(scores.size()); ++id) {
    if (Mergeable(vocab.kind(id)) && vocab.piece(id).size() > 1) {
      by_score.emplace_back(scores[id], id);
    }
  }
  std::stable_sort(by_score.begin(), by_score.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  BpeMergeTable table;
  table.Reserve(by_score.size() * 2);
  int32_t rank = -1;
  for (size_t i = 0; i < by_score.size(); ++i) {
    // Equal scores share a rank so that, as in SentencePiece, the leftmost pair wins a tie.
    if (i == 0 || by_score[i].first != by_score[i - 1].first) ++rank;
    const int32_t id = by_score[i].second;
    const std::string_view piece = vocab.piece(id);
    // Only the first id of a piece can be the result of a merge (Find returns it).
    if (vocab.Find(piece) != id) continue;
    for (size_t k = 1; k < piece.size(); ++k) {
      if ((static_cast<uint8_t>(piece[k]) & 0xC0) == 0x80) continue;  // inside a character
      const auto left = vocab.Find(piece.substr(0, k));
      if (!left || !Mergeable(vocab.kind(*left))) continue;
      const auto right = vocab.Find(piece.substr(k));
      if (!right || !Mergeable(vocab.kind(*right))) continue;
      table.Add(*left, *right, rank, id);
    }
  }
  return table;
}

void SpmBpeTokenizer::EncodeText(std::string_view text, bool at_text_start,
                                 std::vector<int32_t>* out) const {
  std::string norm;
  norm.reserve(text.size() + 2 * kMetaSpace.size());
  const bool prefix = options_.add_dummy_prefix &&
                      (!options_.dummy_prefix_first_only || at_text_start) &&
                      !(options_.dummy_prefix_if_missing && text.starts_with(' '));
  if (prefix) norm.append(kMetaSpace);
  for (char c : text) {
    if (c == ' ' && options_.escape_spaces) {
      norm.append(kMetaSpace);
    } else {
      norm.push_back(c);
    }
  }
  BpeMerger merger;
  std::string_view rest = norm;
  if (!options_.split_on_metaspace) {
    EncodeWord(rest, &merger, out);
    return;
  }
  // Words start at each "▁" (Hugging Face Metaspace split, MergedWithNext).
  while (!rest.empty()) {
    size_t cut = rest.find(kMetaSpace, rest.starts_with(kMetaSpace) ? kMetaSpace.size() : 0);
    if (cut == std::string_view::npos) cut = rest.size();
    EncodeWord(rest.substr(0, cut), &merger, out);
    rest.remove_prefix(cut);
  }
}

void SpmBpeTokenizer::EncodeWord(std::string_view word, BpeMerger* merger,
                                 std::vector<int32_t>* out) const {
  if (options_.ignore_merges) {
    const auto whole = vocab_.Find(word);
    if (whole && Mergeable(vocab_.kind(*whole))) {
      out->push_back(*whole);
      return;
    }
  }
  // Initial symbols: one per character. Characters missing from the vocabulary (and bytes of
  // invalid UTF-8) get ids -1, -2, ... indexing `unknown`; negative ids never merge.
  std::vector<int32_t> ids;
  std::vector<std::string_view> unknown;
  ids.reserve(word.size());
  for (size_t pos = 0; pos < word.size();) {
    size_t len = Utf8SequenceLength(word, pos);
    if (len == 0) len = 1;
    const std::string_view ch = word.substr(pos, len);
    const auto id = vocab_.Find(ch);
    if (id && Mergeable(vocab_.kind(*id))) {
      ids.push_back(*id);
    } else {
      unknown.push_back(ch);
      ids.push_back(-static_cast<int32_t>(unknown.size()));
    }
    pos += len;
  }
  std::vector<BpeNode> tree;
  std::vector<int32_t> roots;
  if (has_unused_) {
    merger->Merge(merges_, &ids, &tree, &roots);
  } else {
    merger->Merge(merges_, &ids);
  }
  bool last_was_unk = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0) {
      EmitUnknown(unknown[-id - 1], &last_was_unk, out);
      continue;
    }
    last_was_unk = false;
    if (has_unused_ && vocab_.kind(id) == TokenKind::kUnused) {
      Expand(tree, roots[i], out);
    } else {
      out->push_back(id);
    }
  }
}

void SpmBpeTokenizer::EmitUnknown(std::string_view bytes, bool* last_was_unk,
                                  std::vector<int32_t>* out) const {
  for (char c : bytes) {
    const int32_t byte_id = options_.byte_fallback ? byte_ids_[static_cast<uint8_t>(c)] : -1;
    if (byte_id >= 0) {
      out->push_back(byte_id);
      *last_was_unk = false;
    } else if (unk_id_ >= 0 && !(options_.fuse_unk && *last_was_unk)) {
      out->push_back(unk_id_);
      *last_was_unk = true;
    }
    // Without byte fallback a whole character is one unknown symbol.
    if (!options_.byte_fallback) break;
  }
}

void SpmBpeTokenizer::Expand(const std::vector<BpeNode>& tree, int32_t node,
                             std::vector<int32_t>* out) const {
  // An "unused" piece may be an intermediate merge result but is never output: split it back
  // into the two pieces it was made of (SentencePiece's resegmentation). Iterative, since a
  // merge chain can be as deep as the word is long.
  std::vector<int32_t> stack = {node};
  while (!stack.empty()) {
    const BpeNode& n = tree[stack.back()];
    stack.pop_back();
    if (n.left >= 0 && vocab_.kind(n.id) == TokenKind::kUnused) {
      stack.push_back(n.right);
      stack.push_back(n.left);
    } else {
      out->push_back(n.id);
    }
  }
}

}  // namespace pagellm
