// Splitting an evaluation text into documents (TinyStories / GPT-2 style corpora separate
// documents with a literal "<|endoftext|>").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pagellm {

inline constexpr std::string_view kEndOfTextSeparator = "<|endoftext|>";

// Splits `text` on every occurrence of `separator`, strips each piece of leading and trailing
// ASCII whitespace (as Python's str.strip() does for ASCII), and drops pieces that end up empty.
// Without a separator in the text the whole (stripped) text is one document.
std::vector<std::string> SplitDocuments(std::string_view text,
                                        std::string_view separator = kEndOfTextSeparator);

}  // namespace pagellm
