// Owns the buffers that weight formats' bind hooks (kernels/weight_format.h) write at load: the
// repacked layout of a multi-tensor format's matrices. Lives as long as the loaded model.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

namespace pagellm {

class WeightStore {
 public:
  // A zeroed, 64-byte aligned buffer of `bytes` bytes that lives as long as the store.
  uint8_t* Allocate(int64_t bytes);
  // A copy of `bytes` [n] that lives as long as the store; a buffer interned before with the
  // same contents is returned instead of a new one (matrices that share an input permutation
  // share one pointer, which lets MatMulMany run them in one dispatch).
  const uint8_t* Intern(const uint8_t* bytes, int64_t n);
  int64_t bytes() const { return bytes_; }

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<uint8_t, FreeDeleter>> buffers_;
  std::vector<std::pair<const uint8_t*, int64_t>> interned_;
  int64_t bytes_ = 0;
};

}  // namespace pagellm
