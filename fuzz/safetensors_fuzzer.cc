// libFuzzer target: safetensors header parsing and tensor bounds.
#include <cstddef>
#include <cstdint>

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
  return 0;
}
