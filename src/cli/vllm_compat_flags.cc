#include "cli/vllm_compat_flags.h"

#include <cctype>
#include <cstdint>
#include <limits>

#include "fmt/format.h"

namespace pagellm::cli {

void AddVllmCompatFlags(CLI::App& app, VllmCompatFlags& f) {
  app.add_option("--dtype", f.dtype,
                 "vLLM's model dtype: auto | half | float16 | bfloat16 | float | float32. "
                 "Unquantized (F32/F16/BF16) weight matrices are converted to it at load "
                 "(bfloat16 runs the AVX512-BF16 kernels); auto keeps them as stored. Quantized "
                 "weights are unaffected; arithmetic accumulates in float32 either way")
      ->capture_default_str();
  app.add_option("--tensor-parallel-size", f.tensor_parallel_size,
                 "Tensor-parallel ranks (alias -tp): processes the model is split across (Megatron "
                 "split over MPI; pagellm starts them with mpirun, --threads is per rank; "
                 "docs/PARALLELISM.md)")
      ->capture_default_str();
  app.add_option("--pipeline-parallel-size", f.pipeline_parallel_size,
                 "Pipeline stages (alias -pp): the layers are split into this many stages, each "
                 "of --tensor-parallel-size ranks (tp x pp processes in all, started with "
                 "mpirun; layers per stage as vLLM splits them, or PAGELLM_PP_LAYER_PARTITION="
                 "\"8,8\"; docs/PARALLELISM.md)")
      ->capture_default_str();
  app.add_option("--quantization,-q", f.quantization,
                 "Weight quantization method: awq | awq_marlin | gptq | gptq_marlin (a Hugging "
                 "Face AWQ / GPTQ checkpoint; the marlin names mean the same formats here) or "
                 "gguf. Optional: the method is read from the checkpoint's quantization_config, "
                 "and a method that differs from it is an error");
  app.add_flag("--trust-remote-code", f.trust_remote_code,
               "Accepted for vLLM compatibility: no model code is ever downloaded or run");
  app.add_flag("--enforce-eager", f.enforce_eager,
               "Accepted for vLLM compatibility: the CPU backend always runs eagerly");
  app.add_option("--download-dir", f.download_dir,
                 "Accepted for vLLM compatibility: models are local paths, nothing is downloaded");
}

StatusOr<std::vector<std::string>> VllmCompatFlags::Check() const {
  std::vector<std::string> notes;
  RETURN_IF_ERROR(ParseWeightDtype(dtype).status());
  if (tensor_parallel_size < 1 || pipeline_parallel_size < 1)
    return InvalidArgumentError("--tensor-parallel-size and --pipeline-parallel-size must be >= 1");
  if (!quantization.empty() && quantization != "None" && quantization != "none") {
    if (quantization == "gguf") {
      notes.push_back("--quantization gguf: the GGUF file's own tensor types are used");
    } else if (quantization != "awq" && quantization != "awq_marlin" && quantization != "gptq" &&
               quantization != "gptq_marlin") {
      return UnimplementedError(fmt::format(
          "--quantization {}: not supported; pagellm reads the weight format from the model "
          "files (safetensors F32/F16/BF16, AWQ and GPTQ checkpoints: awq, awq_marlin, gptq, "
          "gptq_marlin; GGUF files: gguf)",
          quantization));
    }
  }
  if (trust_remote_code)
    notes.push_back("--trust-remote-code has no effect on this engine: no model code is ever run");
  if (enforce_eager)
    notes.push_back(
        "--enforce-eager has no effect on this engine: the CPU backend always runs eagerly");
  if (!download_dir.empty())
    notes.push_back("--download-dir has no effect on this engine: models are local paths");
  return notes;
}

StatusOr<std::optional<DType>> ParseWeightDtype(const std::string& name) {
  if (name == "auto") return std::optional<DType>();
  if (name == "half" || name == "float16") return std::optional<DType>(DType::kF16);
  if (name == "bfloat16") return std::optional<DType>(DType::kBF16);
  if (name == "float" || name == "float32") return std::optional<DType>(DType::kF32);
  return InvalidArgumentError(
      fmt::format("--dtype {}: expected auto, half, float16, bfloat16, float or float32", name));
}

StatusOr<int> ParseTokenCount(const std::string& text) {
  auto value = ParseHumanReadableInt(text);
  if (!value.ok() || *value > std::numeric_limits<int32_t>::max())
    return InvalidArgumentError(fmt::format(
        "--max-model-len '{}': expected an integer, optionally with k/m/g (x1000) or K/M/G "
        "(x1024), e.g. 32k or 32K",
        text));
  return static_cast<int>(*value);
}

StatusOr<int64_t> ParseHumanReadableInt(const std::string& text) {
  const auto bad = [&] {
    return InvalidArgumentError(fmt::format(
        "'{}': expected an integer, optionally with k/m/g (x1000) or K/M/G (x1024)", text));
  };
  if (text.empty()) return bad();
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 15 || text.size() - digits > 1) return bad();
  int64_t value = std::stoll(text.substr(0, digits));
  if (digits < text.size()) {
    int64_t scale = 0;
    switch (text.back()) {
      case 'k':
        scale = 1000;
        break;
      case 'm':
        scale = 1000 * 1000;
        break;
      case 'g':
        scale = 1000 * 1000 * 1000;
        break;
      case 'K':
        scale = 1024;
        break;
      case 'M':
        scale = 1024 * 1024;
        break;
      case 'G':
        scale = 1024 * 1024 * 1024;
        break;
      default:
        return bad();
    }
    if (value > std::numeric_limits<int64_t>::max() / scale) return bad();
    value *= scale;
  }
  return value;
}

}  // namespace pagellm::cli
