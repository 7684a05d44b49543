#include "engine/grammar_vocabulary.h"

#include <algorithm>
#include <vector>

namespace pagellm {

std::shared_ptr<const TokenVocabulary> BuildTokenVocabulary(const Tokenizer& tokenizer,
                                                            int32_t logits_width,
                                                            std::span<const int32_t> eos_ids) {
  const int32_t n = std::min(tokenizer.vocab_size(), logits_width);
  std::vector<std::optional<std::string>> bytes(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) bytes[id] = tokenizer.TokenBytes(id);
  std::vector<int32_t> eos;
  for (int32_t id : eos_ids)
    if (id >= 0 && id < logits_width) eos.push_back(id);
  return std::make_shared<const TokenVocabulary>(std::move(bytes), logits_width, std::move(eos));
}

}  // namespace pagellm
