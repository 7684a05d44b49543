#include "cli/request_json.h"

namespace pagellm::cli {

StatusOr<SamplingParams> SamplingFlags::Resolve(const LoadedModel& model) const {
  SamplingParams p = params;
  const SamplingParams d = DefaultSamplingParams(model);
  p.temperature = temperature.value_or(d.temperature);
  p.top_p = top_p.value_or(d.top_p);
  p.top_k = top_k.value_or(d.top_k);
  p.min_p = min_p.value_or(d.min_p);
  p.repetition_penalty = repetition_penalty.value_or(d.repetition_penalty);
  RETURN_IF_ERROR(p.Validate(model.config.vocab_size));
  return p;
}

void AddSamplingFlags(CLI::App& app, SamplingFlags& f) {
  SamplingParams& p = f.params;
  app.add_option("--max-tokens", p.max_tokens, "Maximum tokens to generate (default 16)");
  app.add_option("--min-tokens", p.min_tokens, "Generate at least this many tokens");
  app.add_option("--temperature", f.temperature, "0 = greedy (default: model's or 1.0)");
  app.add_option("--top-p", f.top_p, "Nucleus sampling mass in (0, 1]");
  app.add_option("--top-k", f.top_k, "Keep the k most likely tokens (0 or -1: all)");
  app.add_option("--min-p", f.min_p, "Drop tokens below min_p x the top probability");
  app.add_option("--repetition-penalty", f.repetition_penalty, "> 1 discourages repeats");
  app.add_option("--presence-penalty", p.presence_penalty, "In [-2, 2]");
  app.add_option("--frequency-penalty", p.frequency_penalty, "In [-2, 2]");
  app.add_option("--seed", p.seed, "Per-request seed: same seed, same output");
  app.add_option("--stop", p.stop, "Stop string (repeatable)");
  app.add_option("--stop-token-ids", p.stop_token_ids, "Token ids that stop generation");
  app.add_flag("--ignore-eos", p.ignore_eos, "Keep generating after EOS");
  app.add_option("--logprobs", p.logprobs, "Return the top-N logprobs of each token");
  app.add_flag("--include-stop-str-in-output", p.include_stop_str_in_output,
               "Keep the matched stop string in the text");
  app.add_flag("!--no-skip-special-tokens", p.skip_special_tokens,
               "Keep special tokens in the text");
}

}  // namespace pagellm::cli
