// --speculative-config as vLLM names it, parsed by spec/speculative_config_parser.h.
#pragma once

#include <cstdint>
#include <string>

namespace pagellm {

// Who proposes the drafts. Spelled "draft_model" / "ngram" on the CLI and in JSON
// (SpeculativeMethodName, ParseSpeculativeMethod in spec/speculative_config_parser.h).
enum class SpeculativeMethod : uint8_t {
  kNone,        // speculative decoding off
  kDraftModel,  // a smaller model with the target's tokenizer (spec/draft_model_proposer.h)
  kNgram,       // prompt lookup in the request's own tokens (spec/ngram_proposer.h)
};

// Speculative decoding (vLLM's --speculative-config). method kNone = off.
struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  std::string model;                   // draft model path (draft_model)
  int32_t num_speculative_tokens = 0;  // k: drafts proposed per step and request
  // Longest sequence the draft runs on (--speculative-max-model-len / "max_model_len"); past it
  // a request decodes without drafts. 0 = min(target max_model_len, the draft's context).
  int32_t max_model_len = 0;
  // n-gram matching: the longest and shortest suffix n-gram looked up in the sequence.
  int32_t prompt_lookup_min = 0;
  int32_t prompt_lookup_max = 0;
  // pagellm extensions (see src/spec/adaptive_draft_policy.h): "adaptive" (default) drafts per
  // request by measured acceptance and step cost, "fixed" always drafts k (vLLM).
  std::string draft_policy = "adaptive";
  // Step tokens below which a step counts as weight-bound (the adaptive policy's cost knee).
  double draft_free_tokens = 9;
  // n-gram drafting rule (src/spec/ngram_proposer.h): "vote" (default, pagellm) or
  // "earliest" (vLLM's prompt lookup).
  std::string ngram_rule = "vote";

  bool enabled() const { return method != SpeculativeMethod::kNone && num_speculative_tokens > 0; }
};

}  // namespace pagellm
