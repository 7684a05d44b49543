// safetensors reader: 8-byte little-endian header length, JSON header, then tensor bytes.
// Every dtype, shape and offset is validated against the file; errors name file and tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mapped_file.h"
#include "model/tensor_view.h"
#include "pagellm/status.h"

namespace pagellm {

class SafetensorsFile {
 public:
  static StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  static StatusOr<std::unique_ptr<SafetensorsFile>> Parse(const uint8_t* data, size_t size,
                                                          std::string name);

  const std::string& name() const { return name_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* FindTensor(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::unique_ptr<MappedFile> file_;
  std::string name_;
  std::vector<TensorView> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace pagellm
