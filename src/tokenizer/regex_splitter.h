// RegexSplitter: the regex pre-tokenization step of byte-level BPE (Hugging Face Split with
// behavior "Isolated", GPT-2's ByteLevel use_regex), compiled with PCRE2 in UTF + UCP mode so
// that \p{L}, \p{N} and \s are Unicode-aware, with JIT when available.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pagellm/status.h"

namespace pagellm {

// Patterns of the GGUF tokenizer.ggml.pre names we support (also what tokenizer.json files
// of these families contain).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

class RegexSplitter {
 public:
  // `pattern` is a regex; with `literal` it is matched as a plain string instead.
  static StatusOr<std::unique_ptr<RegexSplitter>> Create(std::string_view pattern,
                                                         bool literal = false);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Appends the pieces of `text` (valid UTF-8) to `out`: every match, and every stretch
  // between matches, in order. Pieces are views into `text` and cover it exactly.
  void Split(std::string_view text, std::vector<std::string_view>* out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  RegexSplitter() = default;
  std::string pattern_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagellm
