// `pagellm generate --model PATH --prompt TEXT [sampling flags]`: streams the generated text to
// stdout, or with --json prints one object {text, token_ids, finish_reason, logprobs?}.
#include <cstdio>

#include "cli/commands.h"
#include "engine/model_session.h"
#include "engine/sequential_generator.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace pagellm::cli {
namespace {

struct GenerateOptions {
  SessionOptions session;
  std::string prompt;
  bool prompt_set = false;
  bool json = false;
  uint64_t engine_seed = 0;
  // Sampling flags; unset ones fall back to generation_config.json, then vLLM's defaults.
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  SamplingParams params;
};

void ApplyGenerationDefaults(const LoadedModel& m, GenerateOptions& o) {
  const auto& d = m.generation_defaults;
  SamplingParams& p = o.params;
  p.temperature = o.temperature.value_or(d.temperature >= 0 ? d.temperature : 1.0f);
  p.top_p = o.top_p.value_or(d.top_p > 0 ? d.top_p : 1.0f);
  p.top_k = o.top_k.value_or(d.top_k >= 0 ? d.top_k : 0);
  p.min_p = o.min_p.value_or(d.min_p >= 0 ? d.min_p : 0.0f);
  p.repetition_penalty =
      o.repetition_penalty.value_or(d.repetition_penalty > 0 ? d.repetition_penalty : 1.0f);
}

}  // namespace

void AddSamplingFlags(CLI::App& app, SamplingParams& p, std::optional<float>& temperature,
                      std::optional<float>& top_p, std::optional<int>& top_k,
                      std::optional<float>& min_p, std::optional<float>& repetition_penalty) {
  app.add_option("--max-tokens", p.max_tokens, "Maximum tokens to generate (default 16)");
  app.add_option("--min-tokens", p.min_tokens, "Generate at least this many tokens");
  app.add_option("--temperature", temperature, "0 = greedy (default: model's or 1.0)");
  app.add_option("--top-p", top_p, "Nucleus sampling mass in (0, 1]");
  app.add_option("--top-k", top_k, "Keep the k most likely tokens (0 or -1: all)");
  app.add_option("--min-p", min_p, "Drop tokens below min_p x the top probability");
  app.add_option("--repetition-penalty", repetition_penalty, "> 1 discourages repeats");
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

CommandFn RegisterGenerate(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  app.add_option("--model", o->session.model_path, "HF model directory or .gguf file")
      ->required();
  app.add_option("--prompt", o->prompt, "Prompt text; empty starts from BOS alone");
  app.add_flag("--json", o->json, "Print one JSON object instead of streaming text");
  app.add_option("--threads", o->session.threads, "CPU threads (default: all)");
  app.add_option("--max-model-len", o->session.max_model_len,
                 "Context length (default: the model's)");
  app.add_option("--block-size", o->session.block_size, "KV cache block size in tokens");
  app.add_option("--engine-seed", o->engine_seed, "Seed for requests without --seed");
  AddSamplingFlags(app, o->params, o->temperature, o->top_p, o->top_k, o->min_p,
                   o->repetition_penalty);
  return [o]() {
    auto session = ModelSession::Open(o->session);
    if (!session.ok()) return Fail(session.status().message());
    ModelSession& s = **session;
    GenerateOptions& opt = *o;
    ApplyGenerationDefaults(s.model(), opt);
    const Tokenizer& tok = *s.tokenizer();
    std::vector<int32_t> prompt_ids = tok.Encode(opt.prompt, /*add_special=*/true,
                                                 /*parse_special=*/false);
    if (prompt_ids.empty()) {
      if (tok.bos_id() < 0) return Fail("empty prompt and the tokenizer has no BOS token");
      prompt_ids.push_back(tok.bos_id());
    }
    SequentialGenerator gen(&s, opt.engine_seed);
    SequentialGenerator::StreamFn stream;
    if (!opt.json) {
      stream = [](const std::string& delta) {
        std::fwrite(delta.data(), 1, delta.size(), stdout);
        std::fflush(stdout);
      };
    }
    auto result = gen.Generate(prompt_ids, opt.params, stream);
    if (!result.ok()) return Fail(result.status().message());
    if (!opt.json) {
      std::fputc('\n', stdout);
      return 0;
    }
    nlohmann::json j = {{"text", result->text},
                        {"token_ids", result->token_ids},
                        {"prompt_token_ids", prompt_ids},
                        {"finish_reason", result->finish_reason}};
    if (!result->stop_reason.empty()) j["stop_reason"] = result->stop_reason;
    if (opt.params.logprobs.has_value()) {
      nlohmann::json lp = nlohmann::json::array();
      for (const TokenLogprobEntry& e : result->logprobs) {
        nlohmann::json top = nlohmann::json::array();
        for (const auto& [id, v] : e.top)
          top.push_back({{"token_id", id}, {"token", tok.IdToPiece(id)}, {"logprob", v}});
        lp.push_back({{"token_id", e.token_id},
                      {"token", tok.IdToPiece(e.token_id)},
                      {"logprob", e.logprob},
                      {"top_logprobs", top}});
      }
      j["logprobs"] = lp;
    }
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return 0;
  };
}

}  // namespace pagellm::cli
