// vLLM's `--config FILE.yaml` for `serve`: a YAML mapping whose keys are flag names. Each key
// becomes flag arguments (key: value -> --key value; key: true -> --key; key: false -> --no-key
// where that flag exists, else nothing; key: [a, b] -> --key a b; key: {mapping} -> --key
// '<JSON>'), inserted before the command line's own flags. A flag also given on the command
// line keeps the command line's value (vLLM's precedence).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "pagellm/status.h"

namespace pagellm::cli {

// `args` is the serve subcommand's argv after "serve" (flags and the positional model).
// `has_flag("--name")` says whether the subcommand defines that flag. Returns `args` with
// --config FILE replaced by the file's flags.
StatusOr<std::vector<std::string>> ExpandConfigFile(
    const std::vector<std::string>& args, const std::function<bool(const std::string&)>& has_flag);

}  // namespace pagellm::cli
