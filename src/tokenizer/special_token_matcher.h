// Splits text on added-token strings ("<|eot_id|>", "<s>", "<think>", ...) before the model's
// own tokenization, as Hugging Face's AddedVocabulary and llama.cpp's special-token partition
// do: leftmost match wins, and the longest one among matches starting there.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagellm {

class SpecialTokenMatcher {
 public:
  struct Segment {
    std::string_view text;  // the raw text, or the matched token's spelling
    int32_t id = -1;        // the matched token, or -1 for raw text
  };

  SpecialTokenMatcher();

  // `special` tokens are matched only when the caller asks for special parsing; the others
  // (user-defined / non-special added tokens) are always matched, as in Hugging Face. Adding
  // the same string again replaces its id and flag.
  void Add(std::string_view content, int32_t id, bool special);
  bool empty() const { return terminals_ == 0; }

  // Text and token segments in order; text segments are never empty.
  std::vector<Segment> Split(std::string_view text, bool parse_special) const;

 private:
  // A byte trie: each position of the text costs at most the length of the longest token
  // that matches there, whatever the number of tokens (Llama-3 has 256 starting with "<|").
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t id = -1;
    bool special = false;
  };
  int32_t Child(int32_t node, uint8_t byte) const;
  // Length of the longest token matching at text[pos], 0 if none; its id in *id.
  size_t Match(std::string_view text, size_t pos, bool parse_special, int32_t* id) const;

  std::vector<Node> nodes_;
  std::array<int32_t, 256> root_children_;  // direct table for the first byte
  size_t terminals_ = 0;
};

}  // namespace pagellm
