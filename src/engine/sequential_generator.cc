#include "engine/sequential_generator.h"

#include <variant>

#include "engine/generation_utils.h"
#include "fmt/format.h"
#include "sample/stop_checker.h"

namespace pagellm {

SequentialGenerator::SequentialGenerator(ModelSession* session, uint64_t engine_seed,
                                         int max_chunk_tokens)
    : session_(session), seeds_(engine_seed), max_chunk_tokens_(max_chunk_tokens) {}

StatusOr<CompletionOutput> SequentialGenerator::Generate(std::span<const int32_t> prompt_ids,
                                                         const SamplingParams& params,
                                                         const StreamFn& on_text) {
  const ModelConfig& config = session_->config();
  const Tokenizer* tokenizer = session_->tokenizer();
  RETURN_IF_ERROR(params.Validate(config.vocab_size));
  const int max_len = session_->max_model_len();
  const int prompt_len = static_cast<int>(prompt_ids.size());
  if (prompt_len == 0) return InvalidArgumentError("prompt is empty");
  if (prompt_len >= max_len) {
    return InvalidArgumentError(
        fmt::format("prompt has {} tokens; max_model_len is {}, so at most {} prompt tokens fit "
                    "(over by {})",
                    prompt_len, max_len, max_len - 1, prompt_len - max_len + 1));
  }
  const int block_size = session_->block_size();
  const int blocks_needed = (max_len + block_size - 1) / block_size;
  if (blocks_needed >= session_->kv().shape().num_blocks)
    return ResourceExhaustedError("KV cache too small for max_model_len");
  // One request at a time owns blocks 1..n.
  std::vector<int32_t> block_table(blocks_needed);
  for (int i = 0; i < blocks_needed; ++i) block_table[i] = i + 1;

  int32_t eos = -1;
  const std::vector<int32_t> eos_ids = DefaultStopTokenIds(tokenizer, config, &eos);

  StopChecker stop(params, eos, eos_ids, StopChecker::OutputLimit(params, prompt_len, max_len));
  SamplerState rng(params.seed, seeds_);
  std::optional<IncrementalDetokenizer> detok;
  if (tokenizer != nullptr) detok.emplace(*tokenizer, prompt_ids, params.skip_special_tokens);

  CompletionOutput result;
  ForwardOutput out;
  // Prefill in chunks; only the last chunk's last row is sampled.
  for (int start = 0; start < prompt_len; start += max_chunk_tokens_) {
    const int n = std::min(max_chunk_tokens_, prompt_len - start);
    ForwardBatch batch;
    batch.token_ids.assign(prompt_ids.begin() + start, prompt_ids.begin() + start + n);
    batch.seqs.push_back({n, start, block_table, false});
    RETURN_IF_ERROR(session_->backend().Forward(batch, &out));
  }
  int pos = prompt_len;
  while (true) {
    SamplingInput in{params, prompt_ids, result.token_ids, eos_ids};
    SampleResult s = sampler_.Sample(std::span<const float>(out.row(0), out.vocab_size), in, rng);
    result.token_ids.push_back(s.token);
    if (params.logprobs.has_value()) result.logprobs.push_back(ToLogprobEntry(s));
    const std::string piece = detok ? detok->Push(s.token) : std::string();
    const std::string delta = stop.Append(s.token, piece);
    if (on_text && !delta.empty()) on_text(delta);
    if (stop.finished()) break;
    ForwardBatch batch;
    batch.token_ids = {s.token};
    batch.seqs.push_back({1, pos, block_table, false});
    RETURN_IF_ERROR(session_->backend().Forward(batch, &out));
    ++pos;
  }
  result.text = stop.text();
  const size_t streamed = result.text.size() - stop.held_back();
  if (on_text && streamed < result.text.size()) on_text(result.text.substr(streamed));
  result.finish_reason = FinishReasonName(*stop.finish_reason());
  result.stop_reason = StopReasonText(stop.stop_reason());
  return result;
}

}  // namespace pagellm
