// Python string semantics over UTF-8: the Jinja engine must print, strip, split, slice and case
// map text exactly as CPython's str does, because chat-template output is compared byte for
// byte with Python's jinja2.
//
// Strings are UTF-8 byte strings. Operations that Python defines per code point (len, index,
// slice, strip sets) decode first. Bytes that are not valid UTF-8 decode to U+DC80..U+DCFF
// ("surrogateescape", as Python does for undecodable bytes) and encode back to the same byte,
// so any byte string round-trips.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagellm::jinja {

std::u32string DecodeCodepoints(std::string_view text);
std::string EncodeCodepoints(std::u32string_view cps);
void AppendCodepoint(char32_t cp, std::string* out);
size_t CodepointCount(std::string_view text);

// Python's str.isspace() for one code point (also what `\s` matches in a str regex).
bool IsPySpace(char32_t cp);
// Python's str.isprintable() for one code point (repr() escapes the others).
bool IsPyPrintable(char32_t cp);
bool IsPyAlpha(char32_t cp);
bool IsPyDigit(char32_t cp);
bool IsPyAlnum(char32_t cp);
char32_t PyToUpper(char32_t cp);
char32_t PyToLower(char32_t cp);

enum class StripSide { kLeft, kRight, kBoth };
// str.strip / lstrip / rstrip; `chars` unset strips Python whitespace.
std::string PyStrip(std::string_view text, StripSide side,
                    const std::optional<std::string>& chars = std::nullopt);
// str.split(sep, maxsplit); `sep` unset splits on runs of whitespace and drops empty pieces.
std::vector<std::string> PySplit(std::string_view text, const std::optional<std::string>& sep,
                                 int64_t maxsplit);
// str.rsplit(sep, maxsplit).
std::vector<std::string> PyRSplit(std::string_view text, const std::optional<std::string>& sep,
                                  int64_t maxsplit);
std::vector<std::string> PySplitLines(std::string_view text, bool keepends);
// str.replace(old, new, count); count < 0 replaces all. An empty `old` inserts `new` between
// code points, as Python does.
std::string PyReplace(std::string_view text, std::string_view old_text, std::string_view new_text,
                      int64_t count);
std::string PyUpper(std::string_view text);
std::string PyLower(std::string_view text);
// str.capitalize(): first code point upper-cased, the rest lower-cased.
std::string PyCapitalize(std::string_view text);
// str.title(): upper-cases a cased character following an uncased one, lower-cases the rest.
std::string PyTitle(std::string_view text);
// str.find / rfind: code point index of `needle` within [start, end), or -1.
int64_t PyFind(std::string_view text, std::string_view needle, int64_t start, int64_t end,
               bool reverse);
// str.count(sub).
int64_t PyCount(std::string_view text, std::string_view needle);

// repr() of a str: quotes and escapes as CPython does.
std::string PyStringRepr(std::string_view text);
// repr() / str() of a float: shortest round-trip digits, Python's choice of notation.
std::string PyFloatRepr(double value);
// JSON string literal as json.dumps(ensure_ascii=False) writes it.
std::string JsonQuote(std::string_view text);

}  // namespace pagellm::jinja
