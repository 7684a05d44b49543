// A typed, shaped view of tensor bytes that live in a mapped file (never owned).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pagellm/dtype.h"

namespace pagellm {

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  // Outer dimension first (PyTorch order): a Linear weight is [out_features, in_features].
  // GGUF's ne[] is innermost-first; its reader reverses it into this order.
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

}  // namespace pagellm
