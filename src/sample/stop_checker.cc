#include "sample/stop_checker.h"

#include <algorithm>
#include <climits>

#include "pagellm/check.h"

namespace pagellm {

StopChecker::StopChecker(const SamplingParams& params, int32_t eos_token_id,
                         std::span<const int32_t> extra_eos_ids, int max_output_tokens)
    : stop_token_ids_(params.stop_token_ids),
      extra_eos_ids_(extra_eos_ids.begin(), extra_eos_ids.end()),
      eos_token_id_(eos_token_id),
      ignore_eos_(params.ignore_eos),
      include_stop_str_(params.include_stop_str_in_output),
      min_tokens_(params.min_tokens),
      max_output_tokens_(max_output_tokens) {
  // Validate() rejects empty stop strings; skipping them here keeps find("") from matching
  // everywhere if an unvalidated request slips through.
  for (const std::string& s : params.stop) {
    if (!s.empty()) stop_.push_back(s);
  }
}

int StopChecker::OutputLimit(const SamplingParams& params, int prompt_len, int max_model_len) {
  const int by_model = max_model_len - prompt_len;
  return std::min(params.max_tokens.value_or(INT_MAX), by_model);
}

bool StopChecker::IsIn(const std::vector<int32_t>& ids, int32_t id) const {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::string StopChecker::Append(int32_t token_id, std::string_view token_text) {
  CHECK(!finished()) << "token appended to a finished request";
  ++num_tokens_;

  // vLLM's check_stop returns early while num_output_tokens < min_tokens; the sampler has
  // masked these ids until then anyway.
  bool stop_token = false;
  if (num_tokens_ >= min_tokens_) {
    if (!ignore_eos_ && token_id == eos_token_id_ && eos_token_id_ >= 0) {
      stop_token = true;
      stop_reason_ = std::monostate{};
    } else if (IsIn(stop_token_ids_, token_id) ||
               (!ignore_eos_ && IsIn(extra_eos_ids_, token_id))) {
      stop_token = true;
      stop_reason_ = token_id;
    }
  }

  const size_t before = text_.size();
  if (!stop_token || include_stop_str_) text_.append(token_text);
  if (stop_token) finish_reason_ = FinishReason::kStop;
  // Stop strings are searched only in text of tokens past min_tokens (vLLM moves its search
  // offset past that text); a match found in an included stop token's text wins the
  // stop_reason, as vLLM's output processor overrides it with the string.
  if (num_tokens_ > min_tokens_ && text_.size() > before) CheckStopStrings(before);
  if (!finished() && num_tokens_ >= max_output_tokens_) finish_reason_ = FinishReason::kLength;

  size_t end = text_.size();
  if (!finished() && !include_stop_str_) end -= PartialStopLength();
  if (end <= emitted_) return {};
  std::string out = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

void StopChecker::FinishByConstraint() {
  if (finished() && *finish_reason_ != FinishReason::kLength) return;
  finish_reason_ = FinishReason::kStop;
  stop_reason_ = std::monostate{};
}

void StopChecker::CheckStopStrings(size_t new_from) {
  size_t best_pos = std::string::npos;
  const std::string* best = nullptr;
  for (const std::string& s : stop_) {
    // Start where a match would end just inside the new text; earlier matches were seen (or
    // deliberately skipped under min_tokens) by previous calls.
    const size_t start = new_from + 1 >= s.size() ? new_from + 1 - s.size() : 0;
    const size_t pos = text_.find(s, start);
    if (pos != std::string::npos && pos < best_pos) {
      best_pos = pos;
      best = &s;
    }
  }
  if (best == nullptr) return;
  const size_t cut = include_stop_str_ ? best_pos + best->size() : best_pos;
  // Held-back text covers every partial match, so nothing already streamed is cut.
  CHECK(cut >= emitted_) << "stop string cut " << cut << " before streamed text " << emitted_;
  if (cut < text_.size()) text_.resize(cut);
  finish_reason_ = FinishReason::kStop;
  stop_reason_ = *best;
}

size_t StopChecker::PartialStopLength() const {
  size_t best = 0;
  for (const std::string& s : stop_) {
    for (size_t len = std::min(s.size() - 1, text_.size()); len > best; --len) {
      if (text_.compare(text_.size() - len, len, s, 0, len) == 0) {
        best = len;
        break;
      }
    }
  }
  return best;
}

}  // namespace pagellm
