// The grammar engine's view of a model's vocabulary (grammar/token_vocabulary.h), built from
// its tokenizer: token bytes from Tokenizer::TokenBytes, the width of the model's logits row,
// and the ids that end generation.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "grammar/token_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

std::shared_ptr<const TokenVocabulary> BuildTokenVocabulary(const Tokenizer& tokenizer,
                                                            int32_t logits_width,
                                                            std::span<const int32_t> eos_ids);

}  // namespace pagellm
