// `pagellm generate`: one prompt (--prompt, streamed to stdout or one JSON object with --json)
// or a JSONL batch (--input prompts.jsonl --output out.jsonl), through the paged,
// continuously batched engine with every engine flag.
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/request_json.h"
#include "engine/llm.h"
#include "engine/sampling_params_json.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace pagellm::cli {
namespace {

struct GenerateOptions {
  EngineFlags engine;
  std::string prompt;
  std::string input, output;
  bool json = false;
  SamplingFlags sampling;
};

nlohmann::json LogprobsJson(const Tokenizer& tok, const std::vector<TokenLogprobEntry>& lps) {
  nlohmann::json lp = nlohmann::json::array();
  for (const TokenLogprobEntry& e : lps) {
    nlohmann::json top = nlohmann::json::array();
    for (const auto& [id, v] : e.top)
      top.push_back({{"token_id", id}, {"token", tok.IdToPiece(id)}, {"logprob", v}});
    lp.push_back({{"token_id", e.token_id},
                  {"token", tok.IdToPiece(e.token_id)},
                  {"logprob", e.logprob},
                  {"top_logprobs", top}});
  }
  return lp;
}

nlohmann::json CompletionJson(const Tokenizer& tok, const CompletionOutput& c, bool with_logprobs) {
  nlohmann::json j = {
      {"text", c.text}, {"token_ids", c.token_ids}, {"finish_reason", c.finish_reason}};
  if (!c.stop_reason.empty()) j["stop_reason"] = c.stop_reason;
  if (with_logprobs) j["logprobs"] = LogprobsJson(tok, c.logprobs);
  return j;
}

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Single prompt, streamed: steps the engine in this thread and prints text as it is final.
int RunOne(LLM& llm, const SamplingParams& params, const std::string& prompt, bool json) {
  EngineCore& core = llm.core();
  EngineRequest r;
  r.request_id = "0";
  r.prompt_token_ids = llm.Tokenize(prompt);
  r.params = params;
  if (Status st = core.AddRequest(r); !st.ok()) return Fail(st.message());
  CompletionOutput c;
  while (core.HasUnfinishedRequests()) {
    auto outs = core.Step();
    if (!outs.ok()) return Fail(outs.status().message());
    for (EngineOutput& o : *outs) {
      if (!o.error.empty()) return Fail(o.error);
      c.token_ids.insert(c.token_ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      c.text += o.new_text;
      for (auto& lp : o.new_logprobs) c.logprobs.push_back(std::move(lp));
      if (!json && !o.new_text.empty()) {
        std::fwrite(o.new_text.data(), 1, o.new_text.size(), stdout);
        std::fflush(stdout);
      }
      if (o.finished) {
        c.finish_reason = FinishReasonName(o.finish_reason);
        c.stop_reason = o.stop_reason;
      }
    }
  }
  if (!json) {
    std::fputc('\n', stdout);
    return 0;
  }
  nlohmann::json j = CompletionJson(core.tokenizer(), c, params.logprobs.has_value());
  j["prompt_token_ids"] = r.prompt_token_ids;
  fmt::print("{}\n", Dump(j));
  return 0;
}

// JSONL batch: every line {"prompt": ..., sampling fields...}; outputs in input order.
int RunBatch(LLM& llm, const SamplingParams& defaults, const GenerateOptions& o) {
  std::ifstream in(o.input);
  if (!in) return Fail("cannot open " + o.input);
  std::vector<PromptInput> prompts;
  std::vector<SamplingParams> params;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return Fail(fmt::format("{}:{}: not a JSON object", o.input, line_no));
    PromptInput p;
    if (j.contains("prompt") && j["prompt"].is_string()) {
      p.text = j["prompt"];
    } else if (j.contains("prompt_token_ids") && j["prompt_token_ids"].is_array()) {
      p.token_ids = j["prompt_token_ids"].get<std::vector<int32_t>>();
    } else {
      return Fail(fmt::format("{}:{}: needs a string 'prompt'", o.input, line_no));
    }
    auto sp = ParseSamplingParams(j, defaults);
    if (!sp.ok()) return Fail(fmt::format("{}:{}: {}", o.input, line_no, sp.status().message()));
    prompts.push_back(std::move(p));
    params.push_back(*sp);
  }
  auto results = llm.Generate(prompts, params);
  if (!results.ok()) return Fail(results.status().message());
  std::FILE* out = o.output.empty() || o.output == "-" ? stdout : std::fopen(o.output.c_str(), "w");
  if (out == nullptr) return Fail("cannot open " + o.output);
  const Tokenizer& tok = llm.core().tokenizer();
  for (size_t i = 0; i < results->size(); ++i) {
    const RequestOutput& r = (*results)[i];
    nlohmann::json j;
    j["prompt"] = r.prompt;
    j["prompt_token_ids"] = r.prompt_token_ids;
    if (!r.prompt_logprobs.empty()) {
      nlohmann::json pl = nlohmann::json::array();
      for (const auto& e : r.prompt_logprobs) {
        if (!e.has_value()) {
          pl.push_back(nullptr);
        } else {
          pl.push_back(LogprobsJson(tok, {*e})[0]);
        }
      }
      j["prompt_logprobs"] = pl;
    }
    if (r.outputs.size() == 1) {
      nlohmann::json c = CompletionJson(tok, r.outputs[0], params[i].logprobs.has_value());
      j.update(c);
    } else {
      j["outputs"] = nlohmann::json::array();
      for (const CompletionOutput& c : r.outputs)
        j["outputs"].push_back(CompletionJson(tok, c, params[i].logprobs.has_value()));
    }
    fmt::print(out, "{}\n", Dump(j));
  }
  if (out != stdout) std::fclose(out);
  return 0;
}

}  // namespace

CommandFn RegisterGenerate(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  AddEngineFlags(app, o->engine, /*model_required=*/true, "--engine-seed");
  app.add_option("--prompt", o->prompt, "Prompt text; empty starts from BOS alone");
  app.add_option("--input", o->input,
                 "JSONL file: one {\"prompt\": ..., <sampling fields>} object per line");
  app.add_option("--output", o->output,
                 "JSONL results for --input, in input order (default stdout)");
  app.add_flag("--json", o->json, "Print one JSON object instead of streaming text");
  AddSamplingFlags(app, o->sampling);
  return [o]() {
    if (Status st = o->engine.Finalize(); !st.ok()) return Fail(st.message());
    auto llm = LLM::Create(o->engine.config);
    if (!llm.ok()) return Fail(llm.status().message());
    auto params = o->sampling.Resolve((*llm)->core().model());
    if (!params.ok()) return Fail(params.status().message());
    if (!o->input.empty()) return RunBatch(**llm, *params, *o);
    return RunOne(**llm, *params, o->prompt, o->json);
  };
}

}  // namespace pagellm::cli
