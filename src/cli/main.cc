// pagellm: one binary, subcommands in the style of vLLM's CLI.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "backend/tensor_parallel_backend.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/vllm_config_file.h"
#include "cli/vllm_inert_flags.h"
#include "dist/mpi_communicator.h"
#include "dist/mpi_launch.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace {

// A collective that gets no answer for this long ends every rank (dist/communicator.h).
constexpr std::chrono::seconds kCollectiveTimeout{30};

// Rank 0's last word to the other ranks, however main returns.
struct WorkerShutdown {
  pagellm::Communicator* world = nullptr;
  ~WorkerShutdown() {
    if (world != nullptr) (void)pagellm::ShutDownTensorParallelWorkers(*world);
  }
};

// The option `name` of the innermost parsed subcommand that has it (bench latency's, serve's),
// or `fallback`.
template <typename T>
T ParsedOption(const CLI::App& app, const std::string& name, T fallback) {
  for (const CLI::App* sub : app.get_subcommands()) {
    if (!sub->parsed()) continue;
    T inner = ParsedOption(*sub, name, fallback);
    if (inner != fallback) return inner;
    if (const CLI::Option* o = sub->get_option_no_throw(name); o != nullptr && o->count() > 0)
      return o->as<T>();
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  // Started by mpirun (ours, below, or the user's across machines): ranks 1.. are workers of
  // rank 0's engine and never look at the command line; rank 0 runs the command.
  std::unique_ptr<pagellm::MpiCommunicator> world;
  WorkerShutdown shutdown;
  if (pagellm::StartedByMpi()) {
    // MPI starts threads of its own; they must not take SIGINT / SIGTERM (the default action
    // would end the process before a server's handler, which waits for them with sigwait, sees
    // them): they start with the two blocked, and this thread unblocks them again.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    auto created = pagellm::MpiCommunicator::Create(kCollectiveTimeout);
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
    if (!created.ok()) {
      std::fprintf(stderr, "error: %s\n", created.status().ToString().c_str());
      return 1;
    }
    world = std::move(created).value();
    if (world->rank() != 0) {
      // A worker ends on rank 0's shut-down message: SIGINT / SIGTERM (which mpirun passes to
      // every rank) are rank 0's to handle, so that a server drains before its workers go. If
      // rank 0 dies instead, mpirun ends the workers.
      std::signal(SIGINT, SIG_IGN);
      std::signal(SIGTERM, SIG_IGN);
      spdlog::set_default_logger(spdlog::stderr_color_mt("pagellm"));
      spdlog::set_pattern(fmt::format("%^%L%$ %H:%M:%S.%e [rank {}] %v", world->rank()));
      const pagellm::Status s = pagellm::RunTensorParallelWorker(*world);
      if (!s.ok()) {
        spdlog::error("{}", s.ToString());
        return 1;
      }
      return 0;
    }
    if (world->size() > 1) shutdown.world = world.get();
    pagellm::cli::SetTensorParallelWorld(world.get());
  }

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
  add("quantize",
      "Write a GGUF file quantized to a llama.cpp preset (Q4_K_M, Q5_K_S, IQ4_XS, ...), or an "
      "AWQ / GPTQ / int4 Hugging Face checkpoint",
      pagellm::cli::RegisterQuantize);

  // vLLM's multi-letter aliases, which CLI11 cannot declare (its short names are one letter),
  // are spelled out before parsing, and --snake_case flag names become --kebab-case (vLLM's
  // parser accepts both).
  std::vector<std::string> args(argv, argv + argc);
  const auto& aliases = pagellm::cli::VllmShortAliases();
  for (std::string& a : args) {
    if (auto it = aliases.find(a); it != aliases.end()) a = it->second;
    if (a.rfind("--", 0) == 0) {
      const size_t end = std::min(a.find('='), a.size());
      for (size_t i = 2; i < end; ++i)
        if (a[i] == '_') a[i] = '-';
    }
  }
  // `serve --config FILE.yaml`: the file's flags, before the command line's own.
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i].rfind("-", 0) == 0) continue;  // global flags (-v) before the subcommand
    if (args[i] != "serve") break;
    CLI::App* serve = app.get_subcommand("serve");
    std::vector<std::string> tail(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
    auto expanded = pagellm::cli::ExpandConfigFile(tail, [serve](const std::string& flag) {
      return serve->get_option_no_throw(flag) != nullptr;
    });
    if (!expanded.ok()) {
      std::fprintf(stderr, "error: %s\n", expanded.status().message().c_str());
      return 2;
    }
    args.resize(i + 1);
    args.insert(args.end(), expanded->begin(), expanded->end());
    break;
  }
  std::vector<char*> arg_ptrs;
  for (std::string& a : args) arg_ptrs.push_back(a.data());
  CLI11_PARSE(app, static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  // Logs go to stderr: stdout carries the command's output (text, JSON).
  spdlog::set_default_logger(spdlog::stderr_color_mt("pagellm"));
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  spdlog::set_pattern("%^%L%$ %H:%M:%S.%e %v");
  // -tp N -pp M without mpirun: start the N x M ranks (this command again, under mpirun) and
  // wait.
  const CLI::App* plan = app.get_subcommand("plan");
  const int tp = plan->parsed() ? 1 : ParsedOption(app, "--tensor-parallel-size", 1);
  const int pp = plan->parsed() ? 1 : ParsedOption(app, "--pipeline-parallel-size", 1);
  const int ranks = tp * pp;
  if (tp > 0 && pp > 0 && ranks > 1 && world == nullptr)
    return pagellm::RunUnderMpirun(ranks, ParsedOption(app, "--threads", 0), argv);
  if (world != nullptr && world->size() != ranks) {
    spdlog::error(
        "started by mpirun with {} ranks, but --tensor-parallel-size {} x "
        "--pipeline-parallel-size {} is {} (they must match)",
        world->size(), tp, pp, ranks);
    return 1;
  }
  for (auto& [sub, fn] : commands) {
    if (sub->parsed()) return fn();
  }
  return 1;
}
