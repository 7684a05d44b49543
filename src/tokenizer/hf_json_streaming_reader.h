// Reads a Hugging Face tokenizer.json in one streaming (SAX) pass. Everything is kept as a
// nlohmann::json DOM except model.vocab and model.merges, which go straight into a Vocab and
// a compact merge list: those two are 99% of an 11 MB file, and building DOM nodes for them
// (a 150K-entry std::map, a 280K-element array) only to read them once costs more than all
// the rest of loading.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pagellm/status.h"
#include "tokenizer/vocab.h"

namespace pagellm {

struct HfJsonDocument {
  nlohmann::json root;  // the file, with model.vocab and model.merges left out
  Vocab vocab;          // model.vocab, all kNormal
  bool has_vocab = false;
  // model.merges in order, as "left" / "right" views into `merge_text`.
  std::string merge_text;
  std::vector<uint32_t> merge_offsets;  // left_begin, split, right_end per merge
  size_t merge_count() const { return merge_offsets.size() / 3; }
  std::string_view merge_left(size_t i) const {
    return std::string_view(merge_text)
        .substr(merge_offsets[3 * i], merge_offsets[3 * i + 1] - merge_offsets[3 * i]);
  }
  std::string_view merge_right(size_t i) const {
    return std::string_view(merge_text)
        .substr(merge_offsets[3 * i + 1], merge_offsets[3 * i + 2] - merge_offsets[3 * i + 1]);
  }
};

// Merges may be "left right" strings (older files) or ["left", "right"] pairs (newer ones).
StatusOr<HfJsonDocument> ReadHfJsonDocument(std::string_view text);

}  // namespace pagellm
