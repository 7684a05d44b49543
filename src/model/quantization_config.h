// The `quantization_config` of a Hugging Face integer checkpoint (AutoAWQ, AutoGPTQ /
// GPTQModel), read as vLLM reads it: from config.json, else from quantize_config.json beside it
// (older AutoGPTQ repositories); `--quantization` (vLLM's names) may name the method, and a
// method that differs from the checkpoint's is an error. The weight formats themselves are
// kernels/hf_quant_scheme.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/hf_quant_scheme.h"
#include "kernels/weight_format.h"
#include "pagellm/status.h"

namespace pagellm {

struct HfQuantConfig {
  bool enabled = false;
  HfQuantMethod method = HfQuantMethod::kAwq;
  int bits = 0;
  int64_t group_size = 0;         // -1: one group per row (GPTQ)
  bool desc_act = false;          // GPTQ act-order (the g_idx tensors say the order)
  bool sym = true;                // GPTQ; informational (zero points are read either way)
  int zero_offset = 0;            // added to stored zero points: GPTQ "gptq" (v1) format 1, else 0
  std::string checkpoint_format;  // "gemm" (AWQ), "gptq" / "gptq_v2" (GPTQ)
  // Module names whose layers stay unquantized (AWQ's modules_to_not_convert): a module whose
  // name contains one of them is read as a plain `.weight`.
  std::vector<std::string> modules_to_not_convert;

  // "awq", "gptq"
  const char* method_name() const { return method == HfQuantMethod::kAwq ? "awq" : "gptq"; }
  bool Skips(const std::string& module) const;
  // The format row for this checkpoint (enabled only).
  WeightFormat Format() const;
};

// Reads a quantization_config object (`source` names the file in errors). Unsupported
// settings (AWQ gemv / marlin layouts, bits, group sizes) are Unimplemented.
StatusOr<HfQuantConfig> ParseQuantizationConfig(const std::string& json_text,
                                                const std::string& source, bool nested);

// vLLM's --quantization against the checkpoint: "" / "none" / "None" accept what the checkpoint
// says; awq, awq_marlin, gptq, gptq_marlin must match it (the marlin names mean the same formats
// here); anything else is an error.
Status CheckQuantizationOption(const std::string& option, const HfQuantConfig& checkpoint,
                               const std::string& model_dir);

}  // namespace pagellm
