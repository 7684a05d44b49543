// `pagellm quantize INPUT.gguf OUTPUT.gguf TYPE`: llama-quantize's command line. Writes a GGUF
// file whose weights are quantized to one of llama.cpp's presets (model/quant_preset.h gives
// the per-tensor types, which match llama-quantize's) with the engine's quantizers
// (kernels/quantize_blocks.cc), every metadata key copied and general.file_type set. The input's
// weights must be F32, F16 or BF16 (re-quantizing a quantized file compounds the errors).
#include <chrono>
#include <memory>

#include "base/thread_pool.h"
#include "cli/commands.h"
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
  app.add_option("input", *input, "GGUF file with F32/F16/BF16 weights")->required();
  app.add_option("output", *output, "GGUF file to write")->required();
  std::string names;
  for (const QuantPreset& p : QuantPresets()) names += (names.empty() ? "" : ", ") + p.name;
  app.add_option("type", *type, "llama-quantize type: " + names)->required();
  app.add_option("-t,--threads", *threads, "Threads (default: all cores)");
  return [=]() { return Quantize(*input, *output, *type, *threads); };
}

}  // namespace pagellm::cli
