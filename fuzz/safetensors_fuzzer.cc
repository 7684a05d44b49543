// libFuzzer target: safetensors header parsing and tensor bounds, and the AWQ / GPTQ repack
// (kernels/hf_quant_scheme.h) over whatever tensors a file holds.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/hf_quant_scheme.h"
#include "model/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagellm;
  auto file = SafetensorsFile::Parse(data, size, "fuzz.safetensors");
  if (!file.ok()) return 0;
  volatile uint64_t sink = 0;
  for (const TensorView& t : (*file)->tensors()) {
    // Every view must lie inside the input; ASan flags the touch otherwise.
    if (t.nbytes > 0) sink = sink + (t.data[0] ^ t.data[t.nbytes - 1]);
    sink = sink + ((*file)->FindTensor(t.name) == &t);
  }
  for (const auto& [k, v] : (*file)->metadata()) sink = sink + k.size() + v.size();
  // The first (up to) four 1-D / 2-D tensors as the parts of an integer checkpoint matrix whose
  // shape they suggest (inputs = qweight's rows, outputs = scales' columns): every bind either
  // repacks or returns an error, never reads outside the parts.
  std::vector<WeightTensor> parts;
  for (const TensorView& t : (*file)->tensors()) {
    if (parts.size() == 4) break;
    if (t.shape.size() == 2) parts.push_back({t.data, t.dtype, t.shape[0], t.shape[1]});
    if (t.shape.size() == 1) parts.push_back({t.data, t.dtype, 1, t.shape[0]});
  }
  if (parts.size() >= 3) {
    const int64_t rows = parts[2].cols, cols = parts[0].rows;
    for (const auto& [method, bits, group] : {std::tuple{HfQuantMethod::kAwq, 4, int64_t{32}},
                                              {HfQuantMethod::kGptq, 4, int64_t{32}},
                                              {HfQuantMethod::kGptq, 8, int64_t{-1}}}) {
      const WeightFormat f = MakeHfQuantFormat(method, bits, group, 1);
      const size_t n = std::min<size_t>(parts.size(), method == HfQuantMethod::kAwq ? 3 : 4);
      WeightStore store;
      auto m = f.bind(f, {parts.data(), n}, rows, cols, &store);
      if (m.ok()) sink = sink + m->nbytes();
    }
  }
  return 0;
}
