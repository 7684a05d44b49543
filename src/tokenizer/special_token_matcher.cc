#include "tokenizer/special_token_matcher.h"

#include <algorithm>

namespace pagellm {

void SpecialTokenMatcher::Add(std::string content, int32_t id, bool special) {
  if (content.empty()) return;
  auto& bucket = by_first_byte_[static_cast<uint8_t>(content[0])];
  for (Token& t : bucket) {
    if (t.content == content) {  // the same string named twice: the later entry wins
      t.id = id;
      t.special = special;
      return;
    }
  }
  bucket.push_back(Token{std::move(content), id, special});
  std::stable_sort(bucket.begin(), bucket.end(), [](const Token& a, const Token& b) {
    return a.content.size() > b.content.size();
  });
  tokens_.push_back(id);
}

std::vector<SpecialTokenMatcher::Segment> SpecialTokenMatcher::Split(std::string_view text,
                                                                    bool parse_special) const {
  std::vector<Segment> out;
  size_t start = 0;  // start of the pending raw-text segment
  size_t pos = 0;
  while (pos < text.size()) {
    const auto& bucket = by_first_byte_[static_cast<uint8_t>(text[pos])];
    const Token* match = nullptr;
    for (const Token& t : bucket) {
      if (t.special && !parse_special) continue;
      if (text.compare(pos, t.content.size(), t.content) == 0) {
        match = &t;
        break;
      }
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    if (pos > start) out.push_back(Segment{text.substr(start, pos - start), -1});
    out.push_back(Segment{match->content, match->id});
    pos += match->content.size();
    start = pos;
  }
  if (start < text.size()) out.push_back(Segment{text.substr(start), -1});
  return out;
}

}  // namespace pagellm
