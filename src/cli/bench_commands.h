// The `pagellm bench` subcommands; each Register* adds its options to its subcommand and
// returns the function to run when that subcommand is chosen.
#pragma once

#include "cli/commands.h"

namespace pagellm::cli {

// `bench latency`: single-stream prefill and decode tokens/s (llama-bench style).
CommandFn RegisterBenchLatency(CLI::App& app);
// `bench throughput`: offline batch through the engine (vLLM's `bench throughput`).
CommandFn RegisterBenchThroughput(CLI::App& app);
// `bench serve`: streaming load against an OpenAI-compatible server (vLLM's `bench serve`).
CommandFn RegisterBenchServe(CLI::App& app);
// `bench verify`: cost of one speculative verification step of k + 1 tokens vs one decode step.
CommandFn RegisterBenchVerify(CLI::App& app);

}  // namespace pagellm::cli
