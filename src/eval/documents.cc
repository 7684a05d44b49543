#include "eval/documents.h"

namespace pagellm {
namespace {

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string_view Strip(std::string_view s) {
  while (!s.empty() && IsAsciiSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsAsciiSpace(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<std::string> SplitDocuments(std::string_view text, std::string_view separator) {
  std::vector<std::string> docs;
  auto add = [&](std::string_view piece) {
    piece = Strip(piece);
    if (!piece.empty()) docs.emplace_back(piece);
  };
  if (separator.empty()) {
    add(text);
    return docs;
  }
  size_t begin = 0;
  while (true) {
    const size_t at = text.find(separator, begin);
    if (at == std::string_view::npos) {
      add(text.substr(begin));
      break;
    }
    add(text.substr(begin, at - begin));
    begin = at + separator.size();
  }
  return docs;
}

}  // namespace pagellm
