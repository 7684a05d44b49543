// libFuzzer target: GGUF parsing, metadata getters, config extraction and weight binding.
// Any input must yield a Status (never a crash, hang, out-of-bounds read or huge allocation).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/quantize.h"
#include "kernels/weight_format.h"
#include "model/config_parser.h"
#include "model/gguf_file.h"
#include "model/model_weights.h"

namespace {

// Touches the first and last byte of every bound matrix so AddressSanitizer checks that the
// views lie inside the input.
uint8_t TouchMatrix(const pagellm::WeightMatrix& m) {
  if (m.data == nullptr || m.nbytes() == 0) return 0;
  return m.data[0] ^ m.data[m.nbytes() - 1];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagellm;
  auto parsed = GgufFile::Parse(data, size, "fuzz.gguf");
  if (!parsed.ok()) return 0;
  std::unique_ptr<GgufFile> gguf = std::move(parsed).value();
  volatile uint64_t sink = 0;
  for (const std::string& key : gguf->keys()) {
    const GgufValue* v = gguf->Find(key);
    sink = sink + (v != nullptr);
    auto i = gguf->GetInt(key);
    auto f = gguf->GetFloat(key);
    auto s = gguf->GetString(key);
    auto b = gguf->GetBool(key);
    auto a = gguf->GetArray(key, GgufType::kString);
    if (s.ok()) sink = sink + s->size();
    if (a.ok()) {
      for (std::string_view e : (*a)->strings) sink = sink + e.size();
    }
    sink = sink + i.ok() + f.ok() + b.ok();
  }
  // Every tensor's first row through its type's reference dequantizer: the block decoders
  // (Q4_0 .. IQ4_XS) must accept any bytes. Rows longer than 64K elements are skipped (bounded
  // work per input).
  std::vector<float> row;
  for (const TensorView& t : gguf->tensors()) {
    if (t.nbytes > 0) sink = sink + (t.data[0] ^ t.data[t.nbytes - 1]);
    const int64_t cols = t.shape.empty() ? 0 : t.shape.back();
    if (cols == 0 || cols > (int64_t{1} << 16) || t.numel() == 0) continue;
    if (GetWeightFormat(t.dtype).dequantize == nullptr) continue;
    row.resize(static_cast<size_t>(cols));
    DequantizeRow(t.dtype, t.data, row.data(), cols);
    sink = sink + (row[0] == row[cols - 1]);
  }
  auto config = ParseGgufConfig(*gguf);
  sink = sink + config.ok();
  auto model = LoadGgufModel(std::move(gguf));
  if (model.ok()) {
    const ModelWeights& w = (*model)->weights;
    sink = sink + TouchMatrix(w.embed) + TouchMatrix(w.lm_head);
    for (const LayerWeights& l : w.layers) {
      for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
        sink = sink + TouchMatrix(*m);
      }
    }
  }
  return 0;
}
