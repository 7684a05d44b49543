#include "tokenizer/regex_splitter.h"

#include <pcre2.h>

namespace pagellm {

struct RegexSplitter::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() {
    if (code != nullptr) pcre2_code_free(code);
  }
};

RegexSplitter::~RegexSplitter() = default;

StatusOr<std::unique_ptr<RegexSplitter>> RegexSplitter::Create(std::string_view pattern,
                                                               bool literal) {
  std::unique_ptr<RegexSplitter> splitter(new RegexSplitter());
  splitter->pattern_ = std::string(pattern);
  splitter->impl_ = std::make_unique<Impl>();
  int error = 0;
  PCRE2_SIZE offset = 0;
  uint32_t options = PCRE2_UTF | PCRE2_UCP;
  if (literal) options |= PCRE2_LITERAL;
  splitter->impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                                        pattern.size(), options, &error, &offset, nullptr);
  if (splitter->impl_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return InvalidArgumentError("bad pre-tokenizer regex at offset " + std::to_string(offset) +
                                ": " + reinterpret_cast<const char*>(message));
  }
  // JIT is an optimisation only: without it (unsupported CPU, no executable memory) the
  // interpreter gives the same matches.
  splitter->impl_->jit = pcre2_jit_compile(splitter->impl_->code, PCRE2_JIT_COMPLETE) == 0;
  return splitter;
}

void RegexSplitter::Split(std::string_view text, std::vector<std::string_view>* out) const {
  if (text.empty()) return;
  // Match data is per call so that one splitter serves concurrent Encode calls.
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;   // next search start
  size_t last = 0;  // end of the previous piece
  while (pos < text.size()) {
    // The caller validated the UTF-8, so PCRE2 need not check it again on every call.
    int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, text.size(), pos,
                                          PCRE2_NO_UTF_CHECK, md, nullptr)
                        : -1;
    if (!impl_->jit || (rc < 0 && rc != PCRE2_ERROR_NOMATCH)) {
      // Interpreter, also the fallback when the JIT stack is exhausted on huge inputs.
      rc = pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    }
    if (rc < 0) break;  // no further match (or a resource limit): the rest is one piece
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t begin = ov[0];
    size_t end = ov[1];
    if (begin > last) out->push_back(text.substr(last, begin - last));
    if (end == begin) {
      // Empty match: step over one character so the loop makes progress; the character
      // joins the following stretch.
      ++end;
      while (end < text.size() && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) ++end;
      pos = end;
      last = begin;
      continue;
    }
    out->push_back(text.substr(begin, end - begin));
    last = pos = end;
  }
  if (last < text.size()) out->push_back(text.substr(last));
  pcre2_match_data_free(md);
}

}  // namespace pagellm
