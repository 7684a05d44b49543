// `pagellm quantize HF_DIR OUT_DIR awq|gptq|rtn`: integer checkpoints in Hugging Face layout
// (AutoAWQ "gemm" or AutoGPTQ / GPTQModel), written by the project's Python quantizers
// (tools/hf_quantize.py with tools/awq_search.py and tools/gptq_search.py). The algorithms need
// a calibration forward pass that records every linear layer's inputs (AWQ's per-channel
// activation statistics, GPTQ's Hessians X^T X); they are numpy programs because that pass
// is a float64 reference forward with hooks, which the engine's fused kernels do not expose.
// docs/QUANTIZED_CHECKPOINTS.md describes the layouts and the algorithms.
#pragma once

#include <string>

namespace pagellm::cli {

struct HfQuantizeOptions {
  std::string input;   // float HF model directory
  std::string output;  // directory to create
  std::string method;  // awq | gptq | rtn
  int bits = 4;        // gptq: 4 or 8
  int group_size = 128;
  bool desc_act = false;                   // gptq: act-order
  bool asym = false;                       // gptq: zero points (awq and rtn always have them)
  std::string checkpoint_format = "gptq";  // gptq | gptq_v2
  std::string calib_text;                  // awq/gptq: calibration text
  int calib_docs = 64;
  int calib_tokens = 128;
  std::string modules_to_not_convert;
};

bool IsHfQuantizeMethod(const std::string& type);

// Runs the quantizer (progress per layer on stderr); returns the process exit code.
int RunHfQuantize(const HfQuantizeOptions& options);

}  // namespace pagellm::cli
