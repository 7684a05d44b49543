// Subcommands of the `pagellm` binary. Each Register* adds its options to the app and returns
// the function to run when the subcommand is chosen.
#pragma once

#include <functional>

#include "CLI/CLI.hpp"

namespace pagellm::cli {

using CommandFn = std::function<int()>;

CommandFn RegisterGenerate(CLI::App& app);
CommandFn RegisterTokenize(CLI::App& app);
CommandFn RegisterInspect(CLI::App& app);
CommandFn RegisterLogits(CLI::App& app);
CommandFn RegisterBench(CLI::App& app);
CommandFn RegisterPlan(CLI::App& app);
CommandFn RegisterServe(CLI::App& app);
CommandFn RegisterEval(CLI::App& app);
CommandFn RegisterQuantize(CLI::App& app);

// Prints "error: <message>" to stderr and returns exit code 1.
int Fail(const std::string& message);

}  // namespace pagellm::cli
