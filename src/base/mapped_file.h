// Read-only memory mapping of a whole file. The loader points tensors into it; the CPU backend
// then copies the matrices it multiplies onto huge pages (kernels/packed_weights.h) and hands
// these file pages back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "pagellm/status.h"

namespace pagellm {

class MappedFile {
 public:
  static StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

// Reads a whole (small) file into a string.
StatusOr<std::string> ReadFileToString(const std::string& path);
bool FileExists(const std::string& path);

}  // namespace pagellm
