#include "tokenizer/special_token_matcher.h"

#include <algorithm>

namespace pagellm {

SpecialTokenMatcher::SpecialTokenMatcher() {
  nodes_.emplace_back();  // root
  root_children_.fill(-1);
}

int32_t SpecialTokenMatcher::Child(int32_t node, uint8_t byte) const {
  if (node == 0) return root_children_[byte];
  const auto& children = nodes_[node].children;
  auto it =
      std::lower_bound(children.begin(), children.end(), byte,
                       [](const std::pair<uint8_t, int32_t>& c, uint8_t b) { return c.first < b; });
  return it != children.end() && it->first == byte ? it->second : -1;
}

void SpecialTokenMatcher::Add(std::string_view content, int32_t id, bool special) {
  if (content.empty()) return;
  int32_t node = 0;
  for (char ch : content) {
    const uint8_t byte = static_cast<uint8_t>(ch);
    int32_t next = Child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      if (node == 0) {
        root_children_[byte] = next;
      } else {
        auto& children = nodes_[node].children;
        children.insert(
            std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1})),
            {byte, next});
      }
    }
    node = next;
  }
  if (nodes_[node].id < 0) ++terminals_;
  nodes_[node].id = id;
  nodes_[node].special = special;
}

size_t SpecialTokenMatcher::Match(std::string_view text, size_t pos, bool parse_special,
                                  int32_t* id) const {
  size_t best = 0;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = Child(node, static_cast<uint8_t>(text[i]));
    if (node < 0) break;
    const Node& n = nodes_[node];
    if (n.id >= 0 && (parse_special || !n.special)) {
      best = i + 1 - pos;
      *id = n.id;
    }
  }
  return best;
}

std::vector<SpecialTokenMatcher::Segment> SpecialTokenMatcher::Split(std::string_view text,
                                                                     bool parse_special) const {
  std::vector<Segment> out;
  size_t start = 0;  // start of the pending raw-text segment
  size_t pos = 0;
  while (pos < text.size()) {
    int32_t id = -1;
    const size_t len = root_children_[static_cast<uint8_t>(text[pos])] < 0
                           ? 0
                           : Match(text, pos, parse_special, &id);
    if (len == 0) {
      ++pos;
      continue;
    }
    if (pos > start) out.push_back(Segment{text.substr(start, pos - start), -1});
    out.push_back(Segment{text.substr(pos, len), id});
    pos += len;
    start = pos;
  }
  if (start < text.size()) out.push_back(Segment{text.substr(start), -1});
  return out;
}

}  // namespace pagellm
