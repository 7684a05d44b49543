// Owns the buffers that weight formats' bind hooks (kernels/weight_format.h) write at load: the
// repacked layout of a multi-tensor format's matrices. Lives as long as the loaded model.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace pagellm {

class WeightStore {
 public:
  // A zeroed, 64-byte aligned buffer of `bytes` bytes that lives as long as the store.
  uint8_t* Allocate(int64_t bytes);
  int64_t bytes() const { return bytes_; }

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<uint8_t, FreeDeleter>> buffers_;
  int64_t bytes_ = 0;
};

}  // namespace pagellm
