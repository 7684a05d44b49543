#include "chat/python_text.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/utf8.h"

namespace pagellm::jinja {
namespace {

// Undecodable bytes map to lone surrogates U+DC80..U+DCFF, like Python's surrogateescape.
constexpr char32_t kEscapeBase = 0xDC00;

// The C.UTF-8 locale gives glibc's full Unicode ctype tables (case mapping, alpha, digit)
// without depending on the process locale.
locale_t Utf8Locale() {
  static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  return loc;
}

bool InStripSet(char32_t cp, const std::optional<std::u32string>& set) {
  if (!set) return IsPySpace(cp);
  return set->find(cp) != std::u32string::npos;
}

std::u32string_view StripView(std::u32string_view cps, StripSide side,
                              const std::optional<std::u32string>& set) {
  size_t begin = 0, end = cps.size();
  if (side != StripSide::kRight) {
    while (begin < end && InStripSet(cps[begin], set)) ++begin;
  }
  if (side != StripSide::kLeft) {
    while (end > begin && InStripSet(cps[end - 1], set)) --end;
  }
  return cps.substr(begin, end - begin);
}

// Resolves Python's slice-style [start, end) bounds against a length.
void ClampRange(int64_t len, int64_t* start, int64_t* end) {
  if (*start < 0) *start = std::max<int64_t>(0, *start + len);
  if (*end < 0) *end = std::max<int64_t>(0, *end + len);
  *start = std::min(*start, len);
  *end = std::min(*end, len);
}

bool IsCased(char32_t cp) {
  return PyToUpper(cp) != cp || PyToLower(cp) != cp;
}

}  // namespace

std::u32string DecodeCodepoints(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t cp = 0;
    size_t len = DecodeUtf8(text, pos, &cp);
    if (len == 0) {
      out.push_back(kEscapeBase + static_cast<unsigned char>(text[pos]));
      ++pos;
    } else {
      out.push_back(cp);
      pos += len;
    }
  }
  return out;
}

void AppendCodepoint(char32_t cp, std::string* out) {
  if (cp >= kEscapeBase + 0x80 && cp <= kEscapeBase + 0xFF) {
    out->push_back(static_cast<char>(cp - kEscapeBase));
  } else if (cp >= 0xD800 && cp <= 0xDFFF) {
    // Other lone surrogates (from "\ud800" escapes) have no UTF-8 form; encode them the way
    // Python's surrogatepass would so nothing is lost.
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp > 0x10FFFF) {
    AppendUtf8(0xFFFD, out);
  } else {
    AppendUtf8(cp, out);
  }
}

std::string EncodeCodepoints(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) AppendCodepoint(cp, &out);
  return out;
}

size_t CodepointCount(std::string_view text) {
  size_t n = 0, pos = 0;
  while (pos < text.size()) {
    size_t len = Utf8SequenceLength(text, pos);
    pos += len == 0 ? 1 : len;
    ++n;
  }
  return n;
}

bool IsPySpace(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool IsPyPrintable(char32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return false;
  if (cp < 0x7F) return true;
  if (cp <= 0xA0) return false;                    // C1 controls and the no-break space (Zs).
  if (cp >= 0xD800 && cp <= 0xDFFF) return false;  // Cs
  if ((cp >= 0xE000 && cp <= 0xF8FF) || cp >= 0xF0000) return false;  // Co
  // Separators (Zs, Zl, Zp) and format characters (Cf) that chat text can plausibly contain.
  static constexpr char32_t kRanges[][2] = {
      {0xAD, 0xAD},       {0x600, 0x605},     {0x61C, 0x61C},     {0x6DD, 0x6DD},
      {0x70F, 0x70F},     {0x890, 0x891},     {0x8E2, 0x8E2},     {0x1680, 0x1680},
      {0x180E, 0x180E},   {0x2000, 0x200F},   {0x2028, 0x202F},   {0x205F, 0x2064},
      {0x2066, 0x206F},   {0x3000, 0x3000},   {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},
      {0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3},
      {0x1D173, 0x1D17A}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F},
  };
  for (const auto& r : kRanges) {
    if (cp >= r[0] && cp <= r[1]) return false;
  }
  return cp != 0xFFFE && cp != 0xFFFF;
}

bool IsPyAlpha(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  locale_t loc = Utf8Locale();
  return loc != static_cast<locale_t>(0) && iswalpha_l(static_cast<wint_t>(cp), loc);
}

bool IsPyDigit(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  locale_t loc = Utf8Locale();
  return loc != static_cast<locale_t>(0) && iswdigit_l(static_cast<wint_t>(cp), loc);
}

bool IsPyAlnum(char32_t cp) {
  return IsPyAlpha(cp) || IsPyDigit(cp);
}

char32_t PyToUpper(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  locale_t loc = Utf8Locale();
  if (loc == static_cast<locale_t>(0)) return cp;
  return static_cast<char32_t>(towupper_l(static_cast<wint_t>(cp), loc));
}

char32_t PyToLower(char32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  locale_t loc = Utf8Locale();
  if (loc == static_cast<locale_t>(0)) return cp;
  return static_cast<char32_t>(towlower_l(static_cast<wint_t>(cp), loc));
}

std::string PyStrip(std::string_view text, StripSide side,
                    const std::optional<std::string>& chars) {
  std::optional<std::u32string> set;
  if (chars) set = DecodeCodepoints(*chars);
  std::u32string cps = DecodeCodepoints(text);
  return EncodeCodepoints(StripView(cps, side, set));
}

std::vector<std::string> PySplit(std::string_view text, const std::optional<std::string>& sep,
                                 int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t hit = text.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(text.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    out.emplace_back(text.substr(pos));
    return out;
  }
  std::u32string cps = DecodeCodepoints(text);
  size_t i = 0, n = cps.size();
  while (i < n) {
    while (i < n && IsPySpace(cps[i])) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      // The remainder keeps its trailing whitespace stripped, as CPython does.
      size_t end = n;
      while (end > i && IsPySpace(cps[end - 1])) --end;
      out.push_back(EncodeCodepoints(std::u32string_view(cps).substr(i, end - i)));
      return out;
    }
    size_t start = i;
    while (i < n && !IsPySpace(cps[i])) ++i;
    out.push_back(EncodeCodepoints(std::u32string_view(cps).substr(start, i - start)));
  }
  return out;
}

std::vector<std::string> PyRSplit(std::string_view text, const std::optional<std::string>& sep,
                                  int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t end = text.size();
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t hit = text.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(text.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(text.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  std::u32string cps = DecodeCodepoints(text);
  size_t i = cps.size();
  while (i > 0) {
    while (i > 0 && IsPySpace(cps[i - 1])) --i;
    if (i == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t start = 0;
      while (start < i && IsPySpace(cps[start])) ++start;
      out.push_back(EncodeCodepoints(std::u32string_view(cps).substr(start, i - start)));
      break;
    }
    size_t end = i;
    while (i > 0 && !IsPySpace(cps[i - 1])) --i;
    out.push_back(EncodeCodepoints(std::u32string_view(cps).substr(i, end - i)));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> PySplitLines(std::string_view text, bool keepends) {
  std::u32string cps = DecodeCodepoints(text);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  auto is_break = [](char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
           c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
  };
  while (i < cps.size()) {
    if (!is_break(cps[i])) {
      ++i;
      continue;
    }
    size_t eol = i;
    i += (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ? 2 : 1;
    size_t stop = keepends ? i : eol;
    out.push_back(EncodeCodepoints(std::u32string_view(cps).substr(start, stop - start)));
    start = i;
  }
  if (start < cps.size()) out.push_back(EncodeCodepoints(std::u32string_view(cps).substr(start)));
  return out;
}

std::string PyReplace(std::string_view text, std::string_view old_text, std::string_view new_text,
                      int64_t count) {
  std::string out;
  if (old_text.empty()) {
    std::u32string cps = DecodeCodepoints(text);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out.append(new_text);
        ++done;
      }
      if (i < cps.size()) AppendCodepoint(cps[i], &out);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = text.find(old_text, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(new_text);
    pos = hit + old_text.size();
    ++done;
  }
  out.append(text.substr(pos));
  return out;
}

// Unicode's unconditional one-to-many upper-case mappings (SpecialCasing.txt) for the
// characters that occur in ordinary text; Python applies them in str.upper().
const char* SpecialUpper(char32_t cp) {
  switch (cp) {
    case 0xDF:
      return "SS";
    case 0x149:
      return "\xCA\xBCN";
    case 0xFB00:
      return "FF";
    case 0xFB01:
      return "FI";
    case 0xFB02:
      return "FL";
    case 0xFB03:
      return "FFI";
    case 0xFB04:
      return "FFL";
    case 0xFB05:
    case 0xFB06:
      return "ST";
    default:
      return nullptr;
  }
}

std::string PyUpper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : DecodeCodepoints(text)) {
    if (const char* special = SpecialUpper(cp)) {
      out += special;
    } else {
      AppendCodepoint(PyToUpper(cp), &out);
    }
  }
  return out;
}

std::string PyLower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : DecodeCodepoints(text)) {
    if (cp == 0x130) {
      out += "i\xCC\x87";  // İ lower-cases to i + COMBINING DOT ABOVE
    } else {
      AppendCodepoint(PyToLower(cp), &out);
    }
  }
  return out;
}

std::string PyCapitalize(std::string_view text) {
  std::u32string cps = DecodeCodepoints(text);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    AppendCodepoint(i == 0 ? PyToUpper(cps[i]) : PyToLower(cps[i]), &out);
  }
  return out;
}

std::string PyTitle(std::string_view text) {
  std::string out;
  bool prev_cased = false;
  for (char32_t cp : DecodeCodepoints(text)) {
    AppendCodepoint(prev_cased ? PyToLower(cp) : PyToUpper(cp), &out);
    prev_cased = IsCased(cp);
  }
  return out;
}

int64_t PyFind(std::string_view text, std::string_view needle, int64_t start, int64_t end,
               bool reverse) {
  std::u32string cps = DecodeCodepoints(text);
  std::u32string pat = DecodeCodepoints(needle);
  int64_t len = static_cast<int64_t>(cps.size());
  ClampRange(len, &start, &end);
  if (end - start < static_cast<int64_t>(pat.size())) return -1;
  std::u32string_view window = std::u32string_view(cps).substr(start, end - start);
  size_t hit = reverse ? window.rfind(pat) : window.find(pat);
  return hit == std::u32string_view::npos ? -1 : start + static_cast<int64_t>(hit);
}

int64_t PyCount(std::string_view text, std::string_view needle) {
  if (needle.empty()) return static_cast<int64_t>(CodepointCount(text)) + 1;
  int64_t n = 0;
  size_t pos = 0;
  while ((pos = text.find(needle, pos)) != std::string_view::npos) {
    ++n;
    pos += needle.size();
  }
  return n;
}

std::string PyStringRepr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (char32_t cp : DecodeCodepoints(text)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (IsPyPrintable(cp)) {
      AppendCodepoint(cp, &out);
    } else {
      // Escaped bytes print as the lone surrogate they decoded to, as Python shows them.
      if (cp < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
      }
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

std::string PyFloatRepr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci is "[-]d[.ddd]e[+-]XX": pull out the digits and the decimal exponent.
  std::string out;
  size_t pos = 0;
  if (sci[0] == '-') {
    out.push_back('-');
    pos = 1;
  }
  size_t e = sci.find('e');
  std::string digits;
  for (size_t i = pos; i < e; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  int exp10 = std::stoi(sci.substr(e + 1));
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  // Python (float_repr_style 'short') uses fixed notation when the decimal point position
  // `decpt` (digits before the point) is in (-4, 16].
  const int decpt = exp10 + 1;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(decpt) - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, decpt);
      out.push_back('.');
      out += digits.substr(decpt);
    }
    return out;
  }
  out.push_back(digits[0]);
  if (digits.size() > 1) {
    out.push_back('.');
    out += digits.substr(1);
  }
  std::snprintf(buf, sizeof(buf), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
  out += buf;
  return out;
}

std::string JsonQuote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  char buf[8];
  for (char32_t cp : DecodeCodepoints(text)) {
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (cp < 0x20) {
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
          out += buf;
        } else if (cp >= 0xD800 && cp <= 0xDFFF && !(cp >= 0xDC80 && cp <= 0xDCFF)) {
          // A lone surrogate from a "\ud800" literal has no UTF-8 form; name it instead.
          // Escaped undecodable bytes (U+DC80..U+DCFF) fall through and go out unchanged.
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
          out += buf;
        } else {
          AppendCodepoint(cp, &out);
        }
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace pagellm::jinja
