// pagellm: one binary, subcommands in the style of vLLM's CLI.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/commands.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  CLI::App app{"pagellm: LLM inference and serving engine (paged KV cache, continuous batching)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("pagellm ") + PAGELLM_VERSION);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Debug logging");

  std::map<CLI::App*, pagellm::cli::CommandFn> commands;
  auto add = [&](const char* name, const char* help, auto reg) {
    CLI::App* sub = app.add_subcommand(name, help);
    commands[sub] = reg(*sub);
  };
  add("generate", "Generate text for a prompt (or a JSONL file of prompts)",
      pagellm::cli::RegisterGenerate);
  add("tokenize", "Print the token ids of a text as a JSON array", pagellm::cli::RegisterTokenize);
  add("inspect", "Describe a model: architecture, parameters, dtypes, bytes",
      pagellm::cli::RegisterInspect);
  add("logits", "Write raw float32 logits at every position for given token ids",
      pagellm::cli::RegisterLogits);
  add("bench", "Benchmarks: latency, throughput, serve", pagellm::cli::RegisterBench);
  add("plan", "KV-cache capacity plan: blocks, tokens, concurrency on a deployment",
      pagellm::cli::RegisterPlan);
  add("serve", "OpenAI-compatible HTTP server with Prometheus metrics",
      pagellm::cli::RegisterServe);
  add("eval", "Accuracy: perplexity of a text, KL divergence of a KV cache dtype",
      pagellm::cli::RegisterEval);

  // vLLM's two-letter aliases, which CLI11 cannot declare (its short names are one letter):
  // spelled out before parsing.
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    if (a == "-tp") a = "--tensor-parallel-size";
    if (a == "-pp") a = "--pipeline-parallel-size";
  }
  std::vector<char*> arg_ptrs;
  for (std::string& a : args) arg_ptrs.push_back(a.data());
  CLI11_PARSE(app, argc, arg_ptrs.data());
  // Logs go to stderr: stdout carries the command's output (text, JSON).
  spdlog::set_default_logger(spdlog::stderr_color_mt("pagellm"));
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  spdlog::set_pattern("%^%L%$ %H:%M:%S.%e %v");
  for (auto& [sub, fn] : commands) {
    if (sub->parsed()) return fn();
  }
  return 1;
}
