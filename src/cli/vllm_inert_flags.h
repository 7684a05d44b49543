// The `vllm serve` flags that configure things this engine does not have (GPUs, CUDA graphs,
// Ray, LoRA, multimodal inputs, tool-call parsers, ...). They are accepted so that a `vllm serve`
// command line runs unchanged, and each one given is reported once at start-up:
//   "--X has no effect on this engine: <why>", or, where running without it would answer
// requests differently from vLLM (a LoRA adapter, a second data-parallel rank), start-up fails
// with "--X ...: not supported by this engine: <why>". docs/VLLM_COMPATIBILITY.md lists them
// (tests/test_vllm_compat_doc.py keeps the two in step).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "pagellm/status.h"

namespace pagellm::cli {

class VllmInertFlags {
 public:
  // Adds every flag of the table to `app`.
  void Add(CLI::App& app);
  // One note per flag given (in table order), or the first flag whose value this engine cannot
  // honour.
  StatusOr<std::vector<std::string>> Check() const;

 private:
  // Per table entry: the values given (a switch records "true"/"false").
  std::map<int, std::vector<std::string>> given_;
  std::vector<CLI::Option*> options_;
};

// vLLM's short spellings that CLI11 cannot declare (two or more letters after one dash: -tp,
// -dp, -asc, ...), mapped to their long names. main.cc rewrites argv with it before parsing.
const std::map<std::string, std::string>& VllmShortAliases();

}  // namespace pagellm::cli
