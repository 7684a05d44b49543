// StopChecker: decides when one request is finished and which of its text may be streamed,
// following vLLM V1 (vllm/v1/core/sched/utils.py check_stop for tokens, the detokenizer's
// stop-string check, and its held-back streaming buffer).
//
// Per generated token, in this order:
//   * stop tokens, once at least min_tokens tokens exist: the EOS id (unless ignore_eos) ends
//     with stop_reason None; a stop_token_ids id, or an extra EOS id from generation_config
//     (unless ignore_eos), ends with stop_reason = that id. The stop token's text is left out
//     of the output unless include_stop_str_in_output.
//   * stop strings, only in text from tokens after the first min_tokens, and only matches that
//     end in the new token's text (a string split over several tokens is found when its last
//     piece arrives). The text is cut before the match, or after it with
//     include_stop_str_in_output; anything after it in the same token is dropped.
//     stop_reason = the string. When several match, the one starting earliest wins (vLLM takes
//     the first in list order, which can leave an earlier stop string in the output).
//   * max_tokens / max_model_len => finish_reason "length" (a stop token or string on the last
//     allowed token still reports "stop", as vLLM).
//
// Streaming: Append() returns only text that can never be taken back. Without
// include_stop_str_in_output it holds back the longest tail of the text that is a proper
// prefix of some stop string ("Hel" while waiting to see whether "Hello" completes); vLLM
// holds back a fixed max(len(stop)) - 1 characters, we hold back only what could actually
// match, so streams run ahead of vLLM's while the final text is identical. Everything left is
// released when the request finishes. Text is bytes; a UTF-8-safe streaming detokenizer
// upstream keeps pieces whole characters, and cut points are then character boundaries too.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/finish_reason.h"
#include "pagellm/sampling_params.h"

namespace pagellm {

// vLLM's stop_reason: None (EOS, length), the stop token id, or the matched stop string.
using StopReason = std::variant<std::monostate, int32_t, std::string>;

class StopChecker {
 public:
  // eos_token_id: the tokenizer's EOS, -1 if none. extra_eos_ids: further ids that end
  // generation by default (generation_config eos_token_id list, e.g. <|eot_id|>); vLLM adds
  // them to stop_token_ids unless ignore_eos, so they report their id as stop_reason.
  // max_output_tokens: see OutputLimit().
  StopChecker(const SamplingParams& params, int32_t eos_token_id,
              std::span<const int32_t> extra_eos_ids, int max_output_tokens);

  // The most tokens the request may generate: max_tokens, and never past max_model_len
  // (vLLM finishes with "length" when prompt + output reaches max_model_len).
  static int OutputLimit(const SamplingParams& params, int prompt_len, int max_model_len);

  // Feeds the next generated token and the text the streaming detokenizer produced for it;
  // returns the text that is now safe to stream (possibly empty). Must not be called once
  // finished().
  std::string Append(int32_t token_id, std::string_view token_text);

  // Finishes with "stop" (stop_reason None) because a structured-output constraint is
  // complete (or has no valid continuation); also overrides a "length" finish reached by the
  // same token, as a stop token on the last allowed token does.
  void FinishByConstraint();

  bool finished() const { return finish_reason_.has_value(); }
  std::optional<FinishReason> finish_reason() const { return finish_reason_; }
  const StopReason& stop_reason() const { return stop_reason_; }
  // All output text so far, held-back bytes included; the final text once finished.
  const std::string& text() const { return text_; }
  // Bytes of text() not yet returned by Append().
  size_t held_back() const { return text_.size() - emitted_; }
  int num_tokens() const { return num_tokens_; }

 private:
  bool IsIn(const std::vector<int32_t>& ids, int32_t id) const;
  // Looks for stop strings ending after byte `new_from`; on a match truncates and finishes.
  void CheckStopStrings(size_t new_from);
  // Length of the longest tail of text_ that is a proper prefix of a stop string.
  size_t PartialStopLength() const;

  std::vector<std::string> stop_;
  std::vector<int32_t> stop_token_ids_;
  std::vector<int32_t> extra_eos_ids_;
  int32_t eos_token_id_;
  bool ignore_eos_;
  bool include_stop_str_;
  int min_tokens_;
  int max_output_tokens_;

  int num_tokens_ = 0;
  std::string text_;
  size_t emitted_ = 0;
  std::optional<FinishReason> finish_reason_;
  StopReason stop_reason_;
};

}  // namespace pagellm
