// libFuzzer target for the grammar front ends and the automaton. The first byte picks the
// front end (GBNF, JSON Schema, regex); the rest is its input. Checked: no crash, no hang, no
// leak; a grammar that compiles also runs: its matcher is driven over the input bytes on a
// byte-level vocabulary and fills masks, and every token it allows is accepted.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema_converter.h"
#include "grammar/regex_converter.h"

namespace pagellm {
namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

std::shared_ptr<const TokenVocabulary> Vocab() {
  static const auto* vocab = [] {
    std::vector<std::optional<std::string>> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    for (const char* t : {"{\"", "\":", "true", "ab", "\"}"}) bytes.push_back(std::string(t));
    bytes.push_back(std::nullopt);
    const int32_t eos = static_cast<int32_t>(bytes.size() - 1);
    return new std::shared_ptr<const TokenVocabulary>(
        std::make_shared<TokenVocabulary>(std::move(bytes), eos + 1, std::vector<int32_t>{eos}));
  }();
  return *vocab;
}

}  // namespace
}  // namespace pagellm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagellm;
  if (size == 0 || size > 4096) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  StatusOr<Grammar> g = data[0] % 3 == 0   ? ParseGbnf(text)
                        : data[0] % 3 == 1 ? JsonSchemaToGrammar(text)
                                           : RegexToGrammar(text);
  if (!g.ok()) return 0;
  auto compiled = std::make_shared<const CompiledGrammar>(*g, Vocab());
  GrammarMatcher m(compiled);
  std::vector<uint64_t> mask(compiled->vocab().mask_words());
  for (size_t i = 0; i < text.size() && i < 64; ++i) {
    m.FillMask(mask);
    for (int32_t id = 0; id < compiled->vocab().mask_size(); ++id) {
      if ((mask[id >> 6] >> (id & 63)) & 1) {
        Check(m.AcceptToken(id));
        m.Rollback(1);
      }
    }
    if (!m.AcceptToken(static_cast<uint8_t>(text[i]))) break;
  }
  return 0;
}
