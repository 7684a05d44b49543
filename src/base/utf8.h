// UTF-8 helpers for tokenizers: validation, code point decoding, and lossy repair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pagellm {

// The replacement character U+FFFD, UTF-8 encoded.
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// Length of the well-formed UTF-8 sequence starting at text[pos] (1..4), or 0 when the bytes
// there are not a complete, well-formed sequence (bad lead byte, bad continuation, overlong,
// surrogate, > U+10FFFF, or truncated by the end of `text`).
size_t Utf8SequenceLength(std::string_view text, size_t pos);

// Decodes the sequence at text[pos]; returns its length (0 if malformed, *cp untouched).
size_t DecodeUtf8(std::string_view text, size_t pos, uint32_t* cp);

// Appends the UTF-8 encoding of `cp` (must be a scalar value <= U+10FFFF, not a surrogate).
void AppendUtf8(uint32_t cp, std::string* out);

bool IsValidUtf8(std::string_view text);

// Replaces every maximal ill-formed subsequence by one U+FFFD (the Unicode / WHATWG
// "substitution of maximal subparts" rule used by Python's errors="replace" and Rust's
// from_utf8_lossy, and hence by Hugging Face byte-level decoding). This rule is
// compositional at character boundaries: Repair(a + b) == Repair(a) + Repair(b) whenever `a`
// does not end inside an incomplete sequence, which the incremental detokenizer relies on.
std::string RepairUtf8(std::string_view bytes);

// Number of bytes at the end of `text` that form the start of a multi-byte sequence that is
// well-formed so far but incomplete (0..3). Appending bytes could still complete it.
size_t IncompleteUtf8Suffix(std::string_view text);

}  // namespace pagellm
