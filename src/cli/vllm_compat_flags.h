// vLLM engine flags that a `vllm serve` command line carries and that mean nothing on this CPU
// engine or are not built yet. They are accepted so that the command line runs unchanged, and
// each one says at start-up what it does here; a value this engine cannot honour is an error,
// never silently ignored.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "pagellm/dtype.h"
#include "pagellm/status.h"

namespace pagellm::cli {

struct VllmCompatFlags {
  std::string dtype = "auto";  // --dtype
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
  std::string quantization;  // --quantization / -q
  bool trust_remote_code = false;
  bool enforce_eager = false;
  std::string download_dir;

  // The start-up notes for the flags given (one line each), or InvalidArgument / Unimplemented
  // for a value this engine cannot honour.
  StatusOr<std::vector<std::string>> Check() const;
};

// Adds --dtype, --tensor-parallel-size, --pipeline-parallel-size (main.cc maps vLLM's -tp and
// -pp to them), --quantization/-q,
// --trust-remote-code, --enforce-eager, --download-dir.
void AddVllmCompatFlags(CLI::App& app, VllmCompatFlags& flags);

// vLLM's --dtype: auto -> nullopt (weights as stored); half / float16 -> F16; bfloat16 -> BF16;
// float / float32 -> F32 (EngineConfig::float_matrix_dtype). Anything else is InvalidArgument.
StatusOr<std::optional<DType>> ParseWeightDtype(const std::string& name);

// --max-model-len as vLLM reads it: an integer, or with a suffix k/m/g (powers of 1000) or
// K/M/G (powers of 1024): "32k" = 32000, "32K" = 32768.
StatusOr<int> ParseTokenCount(const std::string& text);

// vLLM's human-readable integers (the same suffixes, up to 2^62): "4G" = 4 * 1024^3.
StatusOr<int64_t> ParseHumanReadableInt(const std::string& text);

}  // namespace pagellm::cli
