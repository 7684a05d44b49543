// `pagellm eval perplexity` and `pagellm eval kl`: what a KV cache dtype costs in accuracy,
// measured through the paged engine path (eval/evaluator.h).
//
//   pagellm eval perplexity --model M --text FILE [--kv-cache-dtype D] [--max-length N]
//       [--stride S] [--max-documents K] [--json]
//   pagellm eval kl --model M --text FILE --kv-cache-dtype D [...] [--json]
//
// FILE is split into documents on <|endoftext|>; each is scored with BOS first, documents
// longer than --max-length (default: the context length) with a sliding window of --stride.
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "eval/evaluator.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace pagellm::cli {
namespace {

struct EvalFlags {
  EngineFlags engine;
  std::string text_path;
  EvalOptions eval;
  bool json = false;
};

void AddEvalFlags(CLI::App& app, EvalFlags& f) {
  AddEngineFlags(app, f.engine);
  app.add_option("--text", f.text_path, "Text file; documents separated by <|endoftext|>")
      ->required();
  app.add_option("--max-length", f.eval.max_length,
                 "Window length in tokens (default: --max-model-len, i.e. the model's context)");
  app.add_option("--stride", f.eval.stride,
                 "Sliding-window step for longer documents (default: max length / 2)");
  app.add_option("--max-documents", f.eval.max_documents,
                 "Score only the first N documents (default: all)");
  app.add_option("--batch-tokens", f.eval.batch_tokens,
                 "Tokens per forward batch (default: 4096, fewer for large vocabularies)");
  app.add_flag("--json", f.json, "Print the result as JSON");
}

// Loads the model and tokenizes the text; prints nothing on success.
StatusOr<std::unique_ptr<Evaluator>> Prepare(EvalFlags& f,
                                             std::vector<std::vector<int32_t>>* docs) {
  RETURN_IF_ERROR(f.engine.Finalize());
  std::ifstream in(f.text_path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("cannot read --text {}", f.text_path));
  std::stringstream ss;
  ss << in.rdbuf();
  ASSIGN_OR_RETURN(std::unique_ptr<Evaluator> e, Evaluator::Create(f.engine.config));
  *docs = e->TokenizeText(ss.str(), f.eval.max_documents);
  if (docs->empty()) return InvalidArgumentError(fmt::format("no text in {}", f.text_path));
  return e;
}

nlohmann::json PerplexityJson(const PerplexityResult& r) {
  return {{"tokens", r.tokens},       {"mean_nll", r.mean_nll()}, {"perplexity", r.perplexity()},
          {"documents", r.documents}, {"windows", r.windows},     {"seconds", r.seconds}};
}

// "fp8 (stored as fp8_e4m3, scales calculated)" and the like, for the text report.
std::string DtypeLabel(const Evaluator& e) {
  std::string label = e.kv_cache_dtype_name();
  const std::string stored = e.kv_cache_storage_name();
  if (stored != label) label += fmt::format(" (stored as {})", stored);
  if (e.config().calculate_kv_scales) label += " with --calculate-kv-scales";
  return label;
}

void AddDtypeJson(const Evaluator& e, nlohmann::json& j) {
  j["kv_cache_dtype"] = e.kv_cache_dtype_name();
  j["kv_cache_storage"] = e.kv_cache_storage_name();
  j["calculate_kv_scales"] = e.config().calculate_kv_scales;
}

CommandFn RegisterPerplexity(CLI::App& app) {
  auto f = std::make_shared<EvalFlags>();
  AddEvalFlags(app, *f);
  return [f]() {
    std::vector<std::vector<int32_t>> docs;
    auto e = Prepare(*f, &docs);
    if (!e.ok()) return Fail(e.status().message());
    auto r = (*e)->Perplexity(docs, f->eval);
    if (!r.ok()) return Fail(r.status().message());
    const std::string dtype = DtypeLabel(**e);
    if (f->json) {
      nlohmann::json j = PerplexityJson(*r);
      AddDtypeJson(**e, j);
      fmt::print("{}\n", j.dump());
      return 0;
    }
    fmt::print("kv cache dtype {}: {} documents, {} windows, {} tokens scored\n", dtype,
               r->documents, r->windows, r->tokens);
    fmt::print("mean NLL {:.6f} nats/token, perplexity {:.4f}\n", r->mean_nll(), r->perplexity());
    fmt::print("{:.2f} s ({:.0f} tokens/s)\n", r->seconds,
               r->seconds > 0 ? static_cast<double>(r->tokens) / r->seconds : 0.0);
    return 0;
  };
}

CommandFn RegisterKl(CLI::App& app) {
  auto f = std::make_shared<EvalFlags>();
  AddEvalFlags(app, *f);
  // The dtype under test is the point of this command (the flag comes from AddEngineFlags).
  if (CLI::Option* opt = app.get_option_no_throw("--kv-cache-dtype")) opt->required();
  return [f]() {
    std::vector<std::vector<int32_t>> docs;
    auto e = Prepare(*f, &docs);
    if (!e.ok()) return Fail(e.status().message());
    auto r = (*e)->CompareWithModelDtype(docs, f->eval);
    if (!r.ok()) return Fail(r.status().message());
    const std::string dtype = DtypeLabel(**e);
    if (f->json) {
      nlohmann::json j = {{"positions", r->positions},
                          {"mean_kl", r->mean_kl()},
                          {"max_kl", r->kl_max},
                          {"top1_agreement", r->top1_agreement()},
                          {"perplexity_change", r->perplexity_change()},
                          {"reference", PerplexityJson(r->reference)},
                          {"candidate", PerplexityJson(r->candidate)}};
      AddDtypeJson(**e, j);
      fmt::print("{}\n", j.dump());
      return 0;
    }
    fmt::print("kv cache dtype {} vs the model-dtype cache: {} documents, {} positions\n", dtype,
               r->candidate.documents, r->positions);
    fmt::print("perplexity: model dtype {:.4f}, {} {:.4f} ({:+.3f}%)\n", r->reference.perplexity(),
               dtype, r->candidate.perplexity(), 100.0 * r->perplexity_change());
    fmt::print("mean KL {:.6g} nats (max {:.6g}), top-1 agreement {:.4f}%\n", r->mean_kl(),
               r->kl_max, 100.0 * r->top1_agreement());
    fmt::print("{:.2f} s\n", r->candidate.seconds);
    return 0;
  };
}

}  // namespace

CommandFn RegisterEval(CLI::App& app) {
  app.require_subcommand(1);
  struct Sub {
    CLI::App* app;
    CommandFn fn;
  };
  std::vector<Sub> subs;
  CLI::App* ppl = app.add_subcommand(
      "perplexity", "Perplexity of a text (documents split on <|endoftext|>, sliding window)");
  subs.push_back({ppl, RegisterPerplexity(*ppl)});
  CLI::App* kl = app.add_subcommand(
      "kl", "KL divergence and top-1 agreement of a KV cache dtype vs the model-dtype cache");
  subs.push_back({kl, RegisterKl(*kl)});
  return [subs]() {
    for (const Sub& s : subs)
      if (s.app->parsed()) return s.fn();
    return 1;
  };
}

}  // namespace pagellm::cli
