// GGUF v3 writer: metadata copied from a parsed GgufFile (with overrides) and tensors given as
// bytes of any DType, written in the order added, each aligned to general.alignment (32 unless
// the metadata says otherwise). Used by `pagellm quantize`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "pagellm/status.h"

namespace pagellm {

class GgufWriter {
 public:
  // Every key of `source` in its order and type; `source` must outlive Write().
  void CopyMetadata(const GgufFile& source);
  // Sets (or adds) a uint32 key.
  void SetUint32(const std::string& key, uint32_t value);

  // A tensor of `dtype` and `shape` (outer first), whose bytes Write() asks `fill` for: it gets
  // a buffer of DTypeRowBytes(dtype, shape.back()) x rows bytes to fill.
  using FillFn = std::function<Status(uint8_t* dst)>;
  void AddTensor(std::string name, DType dtype, std::vector<int64_t> shape, FillFn fill);

  // Writes the file (to `path`.tmp, renamed on success); errors name the path.
  Status Write(const std::string& path) const;

 private:
  struct Entry {
    std::string key;
    GgufValue value;  // views into the source file for copied strings
    std::string owned_string;
  };
  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t nbytes;
    FillFn fill;
  };
  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
  uint64_t alignment_ = 32;
};

}  // namespace pagellm
