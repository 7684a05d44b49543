#include "model/gguf_quantizer.h"

#include <algorithm>
#include <cstring>

#include "fmt/format.h"
#include "kernels/quantize.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"

namespace pagellm {
namespace {
bool IsFloat(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
}
}  // namespace

StatusOr<QuantizeGgufResult> QuantizeGguf(
    const std::string& input, const std::string& output, const QuantPreset& preset,
    ThreadPool* pool,
    const std::function<void(size_t index, size_t count, const QuantizedTensorReport&)>& progress) {
  auto in = GgufFile::Open(input);
  if (!in.ok()) return in.status();
  const GgufFile& src = **in;
  auto arch = src.GetString("general.architecture");
  if (!arch.ok())
    return InvalidArgumentError(fmt::format("{}: {}", input, arch.status().message()));
  // Block count and heads per KV head (the preset rules use both); absent keys: defaults.
  auto int_or = [&](const std::string& key, int64_t fallback) {
    auto v = src.GetInt(key);
    return v.ok() ? *v : fallback;
  };
  const int64_t layers = int_or(*arch + ".block_count", 0);
  const int64_t heads = int_or(*arch + ".attention.head_count", 1);
  const int64_t kv_heads = std::max<int64_t>(1, int_or(*arch + ".attention.head_count_kv", heads));
  const bool has_output = src.FindTensor("output.weight") != nullptr;

  GgufWriter writer;
  writer.CopyMetadata(src);
  writer.SetUint32("general.file_type", preset.file_type);
  writer.SetUint32("general.quantization_version", 2);
  QuantizeGgufResult result;
  const auto& tensors = src.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& t = tensors[i];
    const QuantTensorInfo info{t.name, t.shape, static_cast<int>(layers),
                               static_cast<int>(std::max<int64_t>(1, heads / kv_heads)),
                               has_output};
    const DType to = PresetTensorType(preset, info, t.dtype);
    if (to != t.dtype && !IsFloat(t.dtype))
      return InvalidArgumentError(
          fmt::format("{}: tensor '{}' is {}; quantization reads F32, F16 or BF16 weights "
                      "(start from the unquantized model)",
                      input, t.name, DTypeName(t.dtype)));
    const int64_t cols = t.shape.back();
    const int64_t rows = t.numel() / cols;
    QuantizedTensorReport r{t.name,
                            t.shape,
                            t.dtype,
                            to,
                            static_cast<int64_t>(t.nbytes),
                            rows * DTypeRowBytes(to, cols)};
    result.bytes_in += r.bytes_in;
    result.bytes_out += r.bytes_out;
    result.elements += t.numel();
    if (progress) progress(i, tensors.size(), r);
    result.tensors.push_back(r);
    const TensorView* view = &t;
    writer.AddTensor(t.name, to, t.shape, [view, to, rows, cols, pool](uint8_t* dst) {
      if (to == view->dtype) {
        std::memcpy(dst, view->data, view->nbytes);
        return Status::Ok();
      }
      const int64_t in_row = DTypeRowBytes(view->dtype, cols);
      const int64_t out_row = DTypeRowBytes(to, cols);
      auto row_task = [&](int64_t r, int) {
        thread_local std::vector<float> row;
        row.resize(static_cast<size_t>(cols));
        DequantizeRow(view->dtype, view->data + r * in_row, row.data(), cols);
        QuantizeRow(to, row.data(), dst + r * out_row, cols);
      };
      if (pool != nullptr) {
        pool->Run(rows, row_task);
      } else {
        for (int64_t r = 0; r < rows; ++r) row_task(r, 0);
      }
      return Status::Ok();
    });
  }
  Status st = writer.Write(output);
  if (!st.ok()) return st;
  return result;
}

}  // namespace pagellm
