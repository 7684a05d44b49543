#include "engine/llm.h"

#include <unordered_map>

#include "fmt/format.h"

namespace pagellm {

StatusOr<std::unique_ptr<LLM>> LLM::Create(const EngineConfig& config) {
  ASSIGN_OR_RETURN(auto core, EngineCore::Create(config));
  return std::unique_ptr<LLM>(new LLM(std::move(core)));
}

std::vector<int32_t> TokenizePrompt(const Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> ids = tok.Encode(text, /*add_special=*/true, /*parse_special=*/false);
  if (ids.empty() && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  return ids;
}

std::vector<int32_t> LLM::Tokenize(const std::string& text) const {
  return TokenizePrompt(core_->tokenizer(), text);
}

Status LLM::AbortAll(const std::vector<std::string>& ids) {
  for (const std::string& id : ids) core_->Abort(id);
  while (core_->HasUnfinishedRequests()) RETURN_IF_ERROR(core_->Step().status());
  return Status::Ok();
}

StatusOr<std::vector<RequestOutput>> LLM::Generate(const std::vector<PromptInput>& prompts,
                                                   const std::vector<SamplingParams>& params,
                                                   const StepHook& on_step) {
  if (params.size() != 1 && params.size() != prompts.size())
    return InvalidArgumentError("params must have one entry or one per prompt");
  std::vector<RequestOutput> results(prompts.size());
  // request id -> (prompt index, sample index)
  std::unordered_map<std::string, std::pair<size_t, int>> owner;
  std::vector<std::string> submitted;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const SamplingParams& p = params.size() == 1 ? params[0] : params[i];
    RequestOutput& r = results[i];
    r.prompt = prompts[i].text;
    r.prompt_token_ids =
        prompts[i].token_ids.empty() ? Tokenize(prompts[i].text) : prompts[i].token_ids;
    r.request_id = std::to_string(next_id_++);
    r.outputs.resize(std::max(1, p.n));
    for (int k = 0; k < std::max(1, p.n); ++k) {
      EngineRequest er;
      er.request_id = p.n > 1 ? fmt::format("{}-{}", r.request_id, k) : r.request_id;
      er.prompt_token_ids = r.prompt_token_ids;
      er.params = p;
      er.params.n = 1;
      if (p.seed.has_value()) er.params.seed = *p.seed + static_cast<uint64_t>(k);
      er.priority = prompts[i].priority;
      er.cache_salt = prompts[i].cache_salt;
      r.outputs[k].index = k;
      Status st = core_->AddRequest(er);
      if (!st.ok()) {
        RETURN_IF_ERROR(AbortAll(submitted));
        return st.WithContext(fmt::format("prompt {}", i));
      }
      owner.emplace(er.request_id, std::make_pair(i, k));
      submitted.push_back(er.request_id);
    }
  }
  GenerateProgress progress;
  progress.num_prompts = static_cast<int64_t>(prompts.size());
  std::vector<int> samples_left(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    samples_left[i] = static_cast<int>(results[i].outputs.size());
  if (on_step) {
    if (Status st = on_step(progress); !st.ok()) {
      RETURN_IF_ERROR(AbortAll(submitted));
      return st;
    }
  }
  while (core_->HasUnfinishedRequests()) {
    ASSIGN_OR_RETURN(std::vector<EngineOutput> outs, core_->Step());
    for (EngineOutput& o : outs) {
      auto it = owner.find(o.request_id);
      if (it == owner.end()) continue;
      RequestOutput& r = results[it->second.first];
      CompletionOutput& c = r.outputs[it->second.second];
      c.token_ids.insert(c.token_ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      c.text += o.new_text;
      for (auto& lp : o.new_logprobs) c.logprobs.push_back(std::move(lp));
      if (!o.prompt_logprobs.empty() && r.prompt_logprobs.empty())
        r.prompt_logprobs = std::move(o.prompt_logprobs);
      if (o.finished) {
        c.finish_reason = FinishReasonName(o.finish_reason);
        c.stop_reason = o.stop_reason;
        r.num_cached_tokens = o.num_cached_tokens;
        if (--samples_left[it->second.first] == 0) {
          ++progress.prompts_finished;
          progress.prompt_tokens += static_cast<int64_t>(r.prompt_token_ids.size()) *
                                    static_cast<int64_t>(r.outputs.size());
          for (const CompletionOutput& done : r.outputs)
            progress.output_tokens += static_cast<int64_t>(done.token_ids.size());
        }
      }
    }
    if (on_step) {
      if (Status st = on_step(progress); !st.ok()) {
        RETURN_IF_ERROR(AbortAll(submitted));
        return st;
      }
    }
  }
  for (RequestOutput& r : results) r.finished = true;
  return results;
}

}  // namespace pagellm
