// Helpers for the grammar tests: whole-string matching straight on the automaton, and a
// byte-level test vocabulary.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_automaton.h"
#include "grammar/token_vocabulary.h"

namespace pagellm {

// Whether `grammar` matches all of `text`.
inline bool GrammarMatches(const Grammar& grammar, std::string_view text) {
  GrammarAutomaton a(grammar);
  ParserWorkspace ws;
  ParserState s, next;
  a.Start(ws, &s);
  for (char c : text) {
    if (!a.Advance(s, static_cast<uint8_t>(c), ws, &next)) return false;
    std::swap(s, next);
  }
  return s.can_end;
}

// Tokens: the 256 single bytes (ids 0..255), then `extra` multi-byte tokens, then an EOS id
// and one special id that is never usable (mask size = all of them + 3 unused ids).
inline std::shared_ptr<const TokenVocabulary> ByteVocabulary(const std::vector<std::string>& extra,
                                                             int32_t* eos_id) {
  std::vector<std::optional<std::string>> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  for (const std::string& e : extra) bytes.push_back(e);
  *eos_id = static_cast<int32_t>(bytes.size());
  bytes.push_back(std::nullopt);  // EOS
  bytes.push_back(std::nullopt);  // a special token
  const int32_t mask_size = static_cast<int32_t>(bytes.size()) + 3;
  return std::make_shared<TokenVocabulary>(std::move(bytes), mask_size,
                                           std::vector<int32_t>{*eos_id});
}

}  // namespace pagellm
