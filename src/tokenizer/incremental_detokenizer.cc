// IncrementalDetokenizer: vLLM's prefix_offset/read_offset scheme over Tokenizer::Decode.
//
// Why it is exact: a window is only advanced when its text does not end in U+FFFD, i.e. its
// bytes end on a character boundary, and every tokenizer's Decode repairs UTF-8 with the
// maximal-subpart rule, which is compositional at such boundaries (tokenizer/utf8.h). So the
// text of ids[prefix_offset:] always starts with the text of ids[prefix_offset:read_offset],
// and what is emitted is exactly the text the new ids add to the full decode. SentencePiece's
// dummy-prefix space is the one non-local part of decoding; DecodeContinuation handles it.
#include <algorithm>

#include "base/utf8.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {
namespace {

// vLLM starts the first window this many prompt tokens back.
constexpr size_t kInitialContext = 5;
// Drop consumed ids once this many have piled up, so long generations keep O(1) memory.
constexpr size_t kTrimThreshold = 1024;

bool EndsWithReplacement(const std::string& s) {
  return s.size() >= kReplacementChar.size() &&
         std::string_view(s).substr(s.size() - kReplacementChar.size()) == kReplacementChar;
}

// Length of the common prefix of `a` and `b`, cut back to a character boundary of `b`. It is
// all of `a` except after a prompt that ended inside a character, whose U+FFFD the new token
// replaced by the completed character.
size_t CommonPrefix(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  if (i == a.size()) return i;
  while (i > 0 && i < b.size() && (static_cast<uint8_t>(b[i]) & 0xC0) == 0x80) --i;
  return i;
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer,
                                               std::span<const int32_t> prompt_ids,
                                               bool skip_special)
    : tokenizer_(tokenizer),
      skip_special_(skip_special),
      ids_(prompt_ids.begin(), prompt_ids.end()) {
  read_offset_ = ids_.size();
  prefix_offset_ = read_offset_ > kInitialContext ? read_offset_ - kInitialContext : 0;
  MarkText(0, prefix_offset_);
}

std::string IncrementalDetokenizer::DecodeRange(size_t begin, size_t end) const {
  std::span<const int32_t> window(ids_.data() + begin, end - begin);
  return text_before_prefix_ ? tokenizer_.DecodeContinuation(window, skip_special_)
                             : tokenizer_.Decode(window, skip_special_);
}

void IncrementalDetokenizer::MarkText(size_t begin, size_t end) {
  for (size_t i = begin; i < end && !text_before_prefix_; ++i) {
    if (!tokenizer_.IsSpecial(ids_[i])) text_before_prefix_ = true;
  }
}

std::string IncrementalDetokenizer::Push(int32_t id) {
  ids_.push_back(id);
  std::string new_text = DecodeRange(prefix_offset_, ids_.size());
  // An incomplete character (or a lone bad byte) at the end: wait for more ids.
  if (EndsWithReplacement(new_text)) return "";
  return Flush(std::move(new_text));
}

std::string IncrementalDetokenizer::Flush() {
  if (read_offset_ == ids_.size()) return "";
  return Flush(DecodeRange(prefix_offset_, ids_.size()));
}

std::string IncrementalDetokenizer::Flush(std::string new_text) {
  const std::string prefix_text = DecodeRange(prefix_offset_, read_offset_);
  std::string out = new_text.substr(CommonPrefix(prefix_text, new_text));
  MarkText(prefix_offset_, read_offset_);
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  if (prefix_offset_ >= kTrimThreshold) {
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_offset_));
    read_offset_ -= prefix_offset_;
    prefix_offset_ = 0;
  }
  return out;
}

}  // namespace pagellm
