// `pagellm quantize INPUT.gguf OUTPUT.gguf TYPE`: llama-quantize's command line. Writes a GGUF
// file whose weights are quantized to one of llama.cpp's presets (model/quant_preset.h gives
// the per-tensor types, which match llama-quantize's) with the engine's quantizers
// (kernels/quantize_blocks.cc), every metadata key copied and general.file_type set. The input's
// weights must be F32, F16 or BF16 (re-quantizing a quantized file compounds the errors).
// `pagellm quantize HF_DIR OUT_DIR awq|gptq|rtn`: Hugging Face integer checkpoints
// (cli/hf_quantize_command.h).
#include <chrono>
#include <memory>

#include "base/thread_pool.h"
#include "cli/commands.h"
#include "cli/hf_quantize_command.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "model/gguf_quantizer.h"

namespace pagellm::cli {
namespace {

int Quantize(const std::string& input, const std::string& output, const std::string& type_name,
             int threads) {
  auto preset = FindQuantPreset(type_name);
  if (!preset.ok()) return Fail(preset.status().message());
  ThreadPool pool(threads);
  const auto t0 = std::chrono::steady_clock::now();
  auto result = QuantizeGguf(
      input, output, *preset, &pool, [](size_t i, size_t n, const QuantizedTensorReport& r) {
        fmt::print("[{:4}/{:4}] {:<36} {:<14} {:>6} -> {:<6} {:9.2f} MiB -> {:9.2f} MiB\n", i + 1,
                   n, r.name, fmt::format("[{}]", fmt::join(r.shape, ", ")), DTypeName(r.from),
                   DTypeName(r.to), static_cast<double>(r.bytes_in) / (1 << 20),
                   static_cast<double>(r.bytes_out) / (1 << 20));
      });
  if (!result.ok()) return Fail(result.status().message());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("{}: {} ({:.2f} MiB -> {:.2f} MiB, {:.2f} bits per weight) in {:.1f} s\n", output,
             preset->name, static_cast<double>(result->bytes_in) / (1 << 20),
             static_cast<double>(result->bytes_out) / (1 << 20),
             8.0 * static_cast<double>(result->bytes_out) /
                 static_cast<double>(std::max<int64_t>(1, result->elements)),
             s);
  return 0;
}

}  // namespace

CommandFn RegisterQuantize(CLI::App& app) {
  auto input = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  auto type = std::make_shared<std::string>();
  auto threads = std::make_shared<int>(0);
  auto hf = std::make_shared<HfQuantizeOptions>();
  app.add_option("input", *input,
                 "GGUF file with F32/F16/BF16 weights, or a float HF model directory (awq, gptq, "
                 "rtn)")
      ->required();
  app.add_option("output", *output, "GGUF file, or HF checkpoint directory, to write")->required();
  std::string names;
  for (const QuantPreset& p : QuantPresets()) names += (names.empty() ? "" : ", ") + p.name;
  app.add_option("type", *type,
                 "llama-quantize type: " + names +
                     "; or for an HF directory: awq (the AWQ algorithm), gptq (the GPTQ "
                     "algorithm), rtn (round-to-nearest int4, AutoAWQ layout)")
      ->required();
  app.add_option("-t,--threads", *threads, "Threads (default: all cores; GGUF types)");
  auto* g = app.add_option_group("HF checkpoints", "awq, gptq and rtn only");
  g->add_option("--group-size", hf->group_size, "Inputs per scale group (gptq: -1 = one group)")
      ->capture_default_str();
  g->add_option("--bits", hf->bits, "gptq: 4 or 8")->capture_default_str();
  g->add_flag("--desc-act", hf->desc_act, "gptq: act-order (columns by Hessian diagonal, g_idx)");
  g->add_flag("--asym", hf->asym, "gptq: asymmetric (zero points; sym false)");
  g->add_option("--checkpoint-format", hf->checkpoint_format,
                "gptq: zero-point convention, gptq (v1, stores z - 1) or gptq_v2")
      ->capture_default_str();
  g->add_option("--calib-text", hf->calib_text,
                "awq/gptq: calibration text, documents split on <|endoftext|>");
  g->add_option("--calib-docs", hf->calib_docs, "Calibration documents (the last N whole ones)")
      ->capture_default_str();
  g->add_option("--calib-tokens", hf->calib_tokens, "Tokens per calibration document, at most")
      ->capture_default_str();
  g->add_option("--modules-to-not-convert", hf->modules_to_not_convert,
                "awq/rtn: comma-separated module names left in float");
  return [=]() {
    if (IsHfQuantizeMethod(*type)) {
      if (*threads != 0) {
        fmt::print(stderr, "note: --threads has no effect on {} (a numpy program)\n", *type);
      }
      HfQuantizeOptions o = *hf;
      o.input = *input;
      o.output = *output;
      o.method = *type;
      return RunHfQuantize(o);
    }
    return Quantize(*input, *output, *type, *threads);
  };
}

}  // namespace pagellm::cli
