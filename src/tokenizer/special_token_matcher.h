// Splits text on added-token strings ("<|eot_id|>", "<s>", "<think>", ...) before the model's
// own tokenization, as Hugging Face's AddedVocabulary and llama.cpp's special-token partition
// do: leftmost match wins, and the longest one among matches starting there.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pagellm {

class SpecialTokenMatcher {
 public:
  struct Segment {
    std::string_view text;  // raw text when id < 0
    int32_t id = -1;        // the matched token, or -1
  };

  // `special` tokens are matched only when the caller asks for special parsing; the others
  // (user-defined / non-special added tokens) are always matched, as in Hugging Face.
  void Add(std::string content, int32_t id, bool special);
  bool empty() const { return tokens_.empty(); }

  // Text and token segments in order; text segments are never empty.
  std::vector<Segment> Split(std::string_view text, bool parse_special) const;

 private:
  struct Token {
    std::string content;
    int32_t id;
    bool special;
  };
  // Candidates by first byte, longest first, so the scan tests few strings per position.
  std::array<std::vector<Token>, 256> by_first_byte_;
  std::vector<int32_t> tokens_;
};

}  // namespace pagellm
