#include "model/safetensors_file.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "kernels/weight_format.h"

namespace pagellm {
namespace {

// Real headers are a few hundred KiB even for thousands of tensors; the cap keeps a hostile
// length from making us parse (and allocate for) an arbitrarily large JSON document.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

using Json = nlohmann::json;

// Maps a safetensors dtype string to DType (the weight format table's safetensors names).
// Returns false for dtypes we do not load.
bool ParseDType(const std::string& s, DType* out) {
  const WeightFormat* f = FindWeightFormatBySafetensorsDtype(s);
  if (f == nullptr) return false;
  *out = f->dtype;
  return true;
}

// Reads a non-negative JSON integer; floats, negatives and other types are rejected.
bool AsUint(const Json& j, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(j.get<int64_t>());
    return true;
  }
  return false;
}

}  // namespace

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, MappedFile::Open(path));
  const uint8_t* data = mapped->data();
  const size_t size = mapped->size();
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, Parse(data, size, path));
  file->file_ = std::move(mapped);
  return file;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Parse(const uint8_t* data, size_t size,
                                                                  std::string name) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->name_ = std::move(name);
  const std::string& fname = file->name_;

  if (size < 8) {
    return DataLossError(
        fmt::format("{}: truncated: {} bytes, need at least the 8-byte header "
                    "length",
                    fname, size));
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, data, 8);  // little-endian u64
  if (header_len > size - 8) {
    return DataLossError(
        fmt::format("{}: header length {} exceeds the file size {}", fname, header_len, size));
  }
  if (header_len > kMaxHeaderBytes) {
    return DataLossError(fmt::format("{}: header length {} exceeds the {} byte limit", fname,
                                     header_len, kMaxHeaderBytes));
  }
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;
  const char* header = reinterpret_cast<const char*>(data + 8);
  Json root = Json::parse(header, header + header_len, /*cb=*/nullptr,
                          /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return DataLossError(fmt::format("{}: header is not valid JSON", fname));
  }
  if (!root.is_object()) {
    return DataLossError(fmt::format("{}: header is not a JSON object", fname));
  }

  file->tensors_.reserve(root.size());
  for (const auto& [key, entry] : root.items()) {
    if (key == "__metadata__") {
      if (!entry.is_object()) {
        return DataLossError(fmt::format("{}: '__metadata__' is not an object", fname));
      }
      for (const auto& [mk, mv] : entry.items()) {
        if (!mv.is_string()) {
          return DataLossError(
              fmt::format("{}: '__metadata__' value of '{}' is not a string", fname, mk));
        }
        file->metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) {
      return DataLossError(fmt::format("{}: tensor '{}': entry is not an object", fname, key));
    }
    TensorView t;
    t.name = key;

    auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end() || !dtype_it->is_string()) {
      return DataLossError(fmt::format("{}: tensor '{}': missing string 'dtype'", fname, key));
    }
    const std::string dtype = dtype_it->get<std::string>();
    if (!ParseDType(dtype, &t.dtype)) {
      return UnimplementedError(
          fmt::format("{}: tensor '{}': unsupported dtype '{}' (supported: F32, F16, BF16, I32)",
                      fname, key, dtype));
    }

    auto shape_it = entry.find("shape");
    if (shape_it == entry.end() || !shape_it->is_array()) {
      return DataLossError(fmt::format("{}: tensor '{}': missing array 'shape'", fname, key));
    }
    uint64_t numel = 1;
    for (const Json& d : *shape_it) {
      uint64_t dim = 0;
      if (!AsUint(d, &dim) || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return DataLossError(fmt::format(
            "{}: tensor '{}': shape entries must be non-negative integers", fname, key));
      }
      if (__builtin_mul_overflow(numel, dim, &numel) ||
          numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return DataLossError(fmt::format("{}: tensor '{}': element count overflows", fname, key));
      }
      t.shape.push_back(static_cast<int64_t>(dim));
    }

    auto off_it = entry.find("data_offsets");
    uint64_t begin = 0, end = 0;
    if (off_it == entry.end() || !off_it->is_array() || off_it->size() != 2 ||
        !AsUint((*off_it)[0], &begin) || !AsUint((*off_it)[1], &end)) {
      return DataLossError(
          fmt::format("{}: tensor '{}': 'data_offsets' must be [begin, end] non-negative integers",
                      fname, key));
    }
    if (begin > end) {
      return DataLossError(fmt::format("{}: tensor '{}': data_offsets [{}, {}) has begin > end",
                                       fname, key, begin, end));
    }
    if (end > data_size) {
      return DataLossError(fmt::format(
          "{}: tensor '{}': data [{}, {}) beyond end of file (data section is {} bytes, file "
          "size {})",
          fname, key, begin, end, data_size, size));
    }
    uint64_t expected = 0;
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(DTypeBlockBytes(t.dtype)), &expected)) {
      return DataLossError(fmt::format("{}: tensor '{}': byte size overflows", fname, key));
    }
    t.nbytes = end - begin;
    if (t.nbytes != expected) {
      return DataLossError(
          fmt::format("{}: tensor '{}': data_offsets span {} bytes but {} x {} elements need {}",
                      fname, key, t.nbytes, DTypeName(t.dtype), numel, expected));
    }
    t.data = data + data_start + begin;
    file->index_.emplace(key, file->tensors_.size());
    file->tensors_.push_back(std::move(t));
  }
  return file;
}

const TensorView* SafetensorsFile::FindTensor(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace pagellm
