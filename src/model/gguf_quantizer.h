// Quantizes a GGUF file to one of llama.cpp's presets (model/quant_preset.h gives each tensor's
// type) with the engine's quantizers, copying every metadata key and setting
// general.file_type. The input's quantized tensors must be F32, F16 or BF16.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/quant_preset.h"
#include "pagellm/status.h"

namespace pagellm {

struct QuantizedTensorReport {
  std::string name;
  std::vector<int64_t> shape;
  DType from, to;
  int64_t bytes_in, bytes_out;
};

struct QuantizeGgufResult {
  std::vector<QuantizedTensorReport> tensors;  // in file order
  int64_t bytes_in = 0, bytes_out = 0;
  int64_t elements = 0;  // of every tensor
};

// `progress` (may be null) is called once per tensor, in order, before the file is written.
StatusOr<QuantizeGgufResult> QuantizeGguf(
    const std::string& input, const std::string& output, const QuantPreset& preset,
    ThreadPool* pool,
    const std::function<void(size_t index, size_t count, const QuantizedTensorReport&)>& progress);

}  // namespace pagellm
