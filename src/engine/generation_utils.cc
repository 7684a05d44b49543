#include "engine/generation_utils.h"

#include <algorithm>
#include <variant>

namespace pagellm {

TokenLogprobEntry ToLogprobEntry(const SampleResult& s) {
  TokenLogprobEntry e;
  e.token_id = s.token;
  e.logprob = s.logprob.value_or(0.0f);
  e.rank = s.rank;
  for (const TokenLogprob& t : s.top_logprobs) e.top.emplace_back(t.id, t.logprob);
  return e;
}

std::string StopReasonText(const StopReason& reason) {
  if (const auto* id = std::get_if<int32_t>(&reason)) return std::to_string(*id);
  if (const auto* s = std::get_if<std::string>(&reason)) return *s;
  return "";
}

std::vector<int32_t> DefaultStopTokenIds(const Tokenizer* tokenizer, const ModelConfig& config,
                                         int32_t* eos_id) {
  std::vector<int32_t> ids;
  int32_t eos = config.eos_token_ids.empty() ? -1 : config.eos_token_ids.front();
  if (tokenizer != nullptr) {
    eos = tokenizer->eos_id();
    ids = tokenizer->stop_ids();
  }
  auto add = [&](int32_t id) {
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  for (int32_t id : config.eos_token_ids) add(id);
  add(eos);
  *eos_id = eos;
  return ids;
}

}  // namespace pagellm
