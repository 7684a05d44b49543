// GGUF v2/v3 reader: metadata key/values and tensor infos, validated against the file.
// Every offset, size, count, dtype and shape is checked before use; errors name the file and
// the key or tensor. Tensor data stays in the mapping.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mapped_file.h"
#include "model/tensor_view.h"
#include "pagellm/status.h"

namespace pagellm {

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// One metadata value. Scalars are widened (integers to int64/uint64, floats to double);
// strings are views into the mapping; arrays keep their element type. Integer scalars are
// mirrored into both `i` and `u` where the value fits (bool is 0/1 in `i`); in `ints`, uint64
// elements above INT64_MAX wrap.
struct GgufValue {
  GgufType type = GgufType::kUint8;
  GgufType array_type = GgufType::kUint8;  // element type when type == kArray
  int64_t i = 0;                           // signed integers and bool
  uint64_t u = 0;                          // unsigned integers
  double f = 0;                            // float32/float64
  std::string_view s;                      // string
  // Arrays: elements stored in the vectors matching array_type (strings in `strings`,
  // integers in `ints`, floats in `floats`). Nested arrays are rejected by the parser.
  std::vector<std::string_view> strings;
  std::vector<int64_t> ints;
  std::vector<float> floats;
};

class GgufFile {
 public:
  // Maps and parses `path`.
  static StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses bytes the caller keeps alive (used by fuzzers and tests); `name` appears in errors.
  static StatusOr<std::unique_ptr<GgufFile>> Parse(const uint8_t* data, size_t size,
                                                   std::string name);

  uint32_t version() const { return version_; }
  const std::string& name() const { return name_; }

  const GgufValue* Find(std::string_view key) const;
  // Typed getters: NotFound if missing, InvalidArgument naming the key if the type is wrong.
  StatusOr<std::string> GetString(std::string_view key) const;
  StatusOr<int64_t> GetInt(std::string_view key) const;   // any integer type
  StatusOr<double> GetFloat(std::string_view key) const;  // float32/float64 (or integer)
  StatusOr<bool> GetBool(std::string_view key) const;
  StatusOr<const GgufValue*> GetArray(std::string_view key, GgufType element_type) const;

  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* FindTensor(std::string_view name) const;
  const std::vector<std::string>& keys() const { return key_order_; }

 private:
  GgufFile() = default;
  std::unique_ptr<MappedFile> file_;  // null when parsed from caller-owned bytes
  std::string name_;
  uint32_t version_ = 0;
  std::unordered_map<std::string, GgufValue> kv_;
  std::vector<std::string> key_order_;
  std::vector<TensorView> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
  friend class GgufParser;
};

}  // namespace pagellm
