// `pagellm bench`: latency (single stream, llama-bench style), throughput (offline batch through
// the engine, as `vllm bench throughput`) and serve (load against an OpenAI-compatible server,
// as `vllm bench serve`). Each lives in its own bench_*.cc.
#include <vector>

#include "cli/bench_commands.h"

namespace pagellm::cli {

CommandFn RegisterBench(CLI::App& app) {
  app.require_subcommand(1);
  struct Sub {
    CLI::App* app;
    CommandFn fn;
  };
  std::vector<Sub> subs;
  auto add = [&](const char* name, const char* help, CommandFn (*reg)(CLI::App&)) {
    CLI::App* sub = app.add_subcommand(name, help);
    subs.push_back({sub, reg(*sub)});
  };
  add("latency", "Single-stream prefill and decode tokens/s", RegisterBenchLatency);
  add("throughput", "Offline throughput of N requests through the engine (continuous batching)",
      RegisterBenchThroughput);
  add("serve", "Streaming load test of an OpenAI-compatible server (TTFT, TPOT, ITL, E2EL)",
      RegisterBenchServe);
  add("verify", "Cost of verifying k speculative drafts (k + 1 tokens) vs one decode step",
      RegisterBenchVerify);
  return [subs]() {
    for (const Sub& s : subs)
      if (s.app->parsed()) return s.fn();
    return 1;
  };
}

}  // namespace pagellm::cli
