#include "base/utf8.h"

namespace pagellm {
namespace {

// Expected total length for a lead byte, or 0 if the byte cannot start a sequence.
int LeadLength(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Valid range of the second byte; it is narrower than 80..BF after some lead bytes, which is
// how overlong forms, surrogates and values above U+10FFFF are excluded.
bool SecondByteOk(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

bool IsContinuation(uint8_t b) {
  return (b & 0xC0) == 0x80;
}

// Number of bytes at text[pos] that are a well-formed prefix of a sequence (at least 1 for
// the lead byte itself, even if invalid), and the total length the lead byte asks for.
size_t ValidPrefix(std::string_view text, size_t pos, int* want) {
  const uint8_t lead = static_cast<uint8_t>(text[pos]);
  *want = LeadLength(lead);
  if (*want <= 1) return 1;
  size_t n = 1;
  while (n < static_cast<size_t>(*want) && pos + n < text.size()) {
    const uint8_t b = static_cast<uint8_t>(text[pos + n]);
    const bool ok = n == 1 ? SecondByteOk(lead, b) : IsContinuation(b);
    if (!ok) break;
    ++n;
  }
  return n;
}

}  // namespace

size_t Utf8SequenceLength(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  int want = 0;
  const size_t n = ValidPrefix(text, pos, &want);
  return want > 0 && n == static_cast<size_t>(want) ? n : 0;
}

size_t DecodeUtf8(std::string_view text, size_t pos, uint32_t* cp) {
  const size_t len = Utf8SequenceLength(text, pos);
  if (len == 0) return 0;
  const auto* p = reinterpret_cast<const uint8_t*>(text.data() + pos);
  switch (len) {
    case 1:
      *cp = p[0];
      break;
    case 2:
      *cp = ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
      break;
    case 3:
      *cp = ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
      break;
    default:
      *cp =
          ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
  }
  return len;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsValidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t len = Utf8SequenceLength(text, pos);
    if (len == 0) return false;
    pos += len;
  }
  return true;
}

std::string RepairUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    // Copy the longest valid run in one go; the common case is all-valid text.
    size_t run = pos;
    while (run < bytes.size()) {
      if (static_cast<uint8_t>(bytes[run]) < 0x80) {
        ++run;
        continue;
      }
      const size_t len = Utf8SequenceLength(bytes, run);
      if (len == 0) break;
      run += len;
    }
    out.append(bytes.data() + pos, run - pos);
    pos = run;
    if (pos == bytes.size()) break;
    int want = 0;
    pos += ValidPrefix(bytes, pos, &want);
    out.append(kReplacementChar);
  }
  return out;
}

size_t IncompleteUtf8Suffix(std::string_view text) {
  const size_t n = text.size();
  for (size_t k = 1; k <= 3 && k <= n; ++k) {
    const uint8_t b = static_cast<uint8_t>(text[n - k]);
    if (IsContinuation(b)) continue;
    // text[n - k] is the last non-continuation byte: the only candidate lead byte.
    int want = 0;
    const size_t valid = ValidPrefix(text, n - k, &want);
    return want > static_cast<int>(k) && valid == k ? k : 0;
  }
  return 0;
}

}  // namespace pagellm
