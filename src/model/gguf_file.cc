#include "model/gguf_file.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <limits>

#include "kernels/weight_format.h"

namespace pagellm {
namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;

// ggml type ids (ggml.h `enum ggml_type`), indexed by id; empty names are ids that were
// removed from ggml and never appear in valid files.
constexpr std::array<std::string_view, 40> kGgmlTypeNames = {
    "F32",   "F16",        "Q4_0",       "Q4_1",       "",         "",         "Q5_0",
    "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
    "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
    "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
    "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
    "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",
};

std::string GgmlTypeName(uint32_t id) {
  if (id < kGgmlTypeNames.size() && !kGgmlTypeNames[id].empty()) {
    return fmt::format("{} (id {})", kGgmlTypeNames[id], id);
  }
  return fmt::format("id {}", id);
}

const char* GgufTypeName(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
      return "uint8";
    case GgufType::kInt8:
      return "int8";
    case GgufType::kUint16:
      return "uint16";
    case GgufType::kInt16:
      return "int16";
    case GgufType::kUint32:
      return "uint32";
    case GgufType::kInt32:
      return "int32";
    case GgufType::kFloat32:
      return "float32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kUint64:
      return "uint64";
    case GgufType::kInt64:
      return "int64";
    case GgufType::kFloat64:
      return "float64";
  }
  return "?";
}

// Encoded size of one scalar of type t; strings report their minimum (the u64 length).
// Returns 0 for values that are not valid GGUF types.
uint64_t MinEncodedSize(uint32_t t) {
  switch (static_cast<GgufType>(t)) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
    case GgufType::kString:
      return 8;
    case GgufType::kArray:
      return 12;  // element type u32 + count u64
  }
  return 0;
}

bool IsIntegerType(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

bool IsUnsignedType(GgufType t) {
  return t == GgufType::kUint8 || t == GgufType::kUint16 || t == GgufType::kUint32 ||
         t == GgufType::kUint64;
}

}  // namespace

// Sequential little-endian reader over the file bytes. Every read checks the remaining
// length first, so a truncated or hostile file yields DataLoss naming what was being read.
class GgufParser {
 public:
  GgufParser(const uint8_t* data, size_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}

  Status Run(GgufFile* out);

 private:
  uint64_t remaining() const { return size_ - pos_; }

  Status Truncated(const std::string& what) const {
    return DataLossError(fmt::format("{}: truncated while reading {} at offset {} (file size {})",
                                     name_, what, pos_, size_));
  }

  template <typename T>
  Status Read(T* v, const std::string& what) {
    if (remaining() < sizeof(T)) return Truncated(what);
    std::memcpy(v, data_ + pos_,
                sizeof(T));  // GGUF is little-endian, as is every host we build for
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status ReadString(std::string_view* s, const std::string& what) {
    uint64_t len = 0;
    RETURN_IF_ERROR(Read(&len, what + " length"));
    if (len > remaining()) {
      return DataLossError(fmt::format("{}: {} length {} exceeds the {} bytes left in the file",
                                       name_, what, len, remaining()));
    }
    *s = std::string_view(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return Status::Ok();
  }

  Status ReadScalar(GgufType type, GgufValue* v, const std::string& what);
  Status ReadValue(uint32_t raw_type, GgufValue* v, const std::string& key);
  Status ReadArray(GgufValue* v, const std::string& key);
  Status ReadTensorInfo(uint64_t index, GgufFile* out, std::vector<uint64_t>* offsets);

  const uint8_t* data_;
  size_t size_;
  const std::string& name_;
  uint64_t pos_ = 0;
};

Status GgufParser::ReadScalar(GgufType type, GgufValue* v, const std::string& what) {
  switch (type) {
    case GgufType::kUint8: {
      uint8_t x;
      RETURN_IF_ERROR(Read(&x, what));
      v->u = x;
      break;
    }
    case GgufType::kInt8: {
      int8_t x;
      RETURN_IF_ERROR(Read(&x, what));
      v->i = x;
      break;
    }
    case GgufType::kUint16: {
      uint16_t x;
      RETURN_IF_ERROR(Read(&x, what));
      v->u = x;
      break;
    }
    case GgufType::kInt16: {
      int16_t x;
      RETURN_IF_ERROR(Read(&x, what));
      v->i = x;
      break;
    }
    case GgufType::kUint32: {
      uint32_t x;
      RETURN_IF_ERROR(Read(&x, what));
      v->u = x;
      break;
    }
    case GgufType::kInt32: {
      int32_t x;
      RETURN_IF_ERROR(Read(&x, what));
      v->i = x;
      break;
    }
    case GgufType::kUint64: {
      RETURN_IF_ERROR(Read(&v->u, what));
      break;
    }
    case GgufType::kInt64: {
      RETURN_IF_ERROR(Read(&v->i, what));
      break;
    }
    case GgufType::kFloat32: {
      float x;
      RETURN_IF_ERROR(Read(&x, what));
      v->f = x;
      break;
    }
    case GgufType::kFloat64: {
      RETURN_IF_ERROR(Read(&v->f, what));
      break;
    }
    case GgufType::kBool: {
      uint8_t x;
      RETURN_IF_ERROR(Read(&x, what));
      v->i = x != 0;
      break;
    }
    case GgufType::kString: {
      RETURN_IF_ERROR(ReadString(&v->s, what));
      break;
    }
    case GgufType::kArray:
      return InternalError("GgufParser::ReadScalar called for an array");
  }
  // Mirror integers into both fields where representable so callers need not care about
  // signedness (GetInt does the range checks).
  if (IsUnsignedType(type)) {
    if (v->u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      v->i = static_cast<int64_t>(v->u);
    }
  } else if (IsIntegerType(type) && v->i >= 0) {
    v->u = static_cast<uint64_t>(v->i);
  }
  return Status::Ok();
}

Status GgufParser::ReadArray(GgufValue* v, const std::string& key) {
  uint32_t elem_raw = 0;
  RETURN_IF_ERROR(Read(&elem_raw, fmt::format("array element type of key '{}'", key)));
  const uint64_t elem_size = MinEncodedSize(elem_raw);
  if (elem_size == 0) {
    return DataLossError(
        fmt::format("{}: key '{}': invalid array element type {}", name_, key, elem_raw));
  }
  const auto elem = static_cast<GgufType>(elem_raw);
  if (elem == GgufType::kArray) {
    return DataLossError(fmt::format("{}: key '{}': nested arrays are not supported", name_, key));
  }
  uint64_t count = 0;
  RETURN_IF_ERROR(Read(&count, fmt::format("array length of key '{}'", key)));
  // Bound the count by the bytes left before reserving anything: a hostile count must not
  // turn into a huge allocation.
  if (count > remaining() / elem_size) {
    return DataLossError(fmt::format(
        "{}: key '{}': array of {} {} elements needs at least {} bytes per element but only {} "
        "bytes are left",
        name_, key, count, GgufTypeName(elem), elem_size, remaining()));
  }
  v->array_type = elem;
  const std::string what = fmt::format("element of array '{}'", key);
  if (elem == GgufType::kString) {
    v->strings.reserve(count);
  } else if (elem == GgufType::kFloat32 || elem == GgufType::kFloat64) {
    v->floats.reserve(count);
  } else {
    v->ints.reserve(count);
  }
  for (uint64_t k = 0; k < count; ++k) {
    GgufValue e;
    RETURN_IF_ERROR(ReadScalar(elem, &e, what));
    if (elem == GgufType::kString) {
      v->strings.push_back(e.s);
    } else if (elem == GgufType::kFloat32 || elem == GgufType::kFloat64) {
      v->floats.push_back(static_cast<float>(e.f));
    } else if (elem == GgufType::kUint64) {
      v->ints.push_back(static_cast<int64_t>(e.u));  // wraps above INT64_MAX; documented
    } else {
      v->ints.push_back(e.i);
    }
  }
  return Status::Ok();
}

Status GgufParser::ReadValue(uint32_t raw_type, GgufValue* v, const std::string& key) {
  if (MinEncodedSize(raw_type) == 0) {
    return DataLossError(fmt::format("{}: key '{}': invalid value type {}", name_, key, raw_type));
  }
  v->type = static_cast<GgufType>(raw_type);
  if (v->type == GgufType::kArray) return ReadArray(v, key);
  return ReadScalar(v->type, v, fmt::format("value of key '{}'", key));
}

Status GgufParser::ReadTensorInfo(uint64_t index, GgufFile* out, std::vector<uint64_t>* offsets) {
  std::string_view name;
  RETURN_IF_ERROR(ReadString(&name, fmt::format("name of tensor #{}", index)));
  const std::string tname(name);
  uint32_t n_dims = 0;
  RETURN_IF_ERROR(Read(&n_dims, fmt::format("n_dims of tensor '{}'", tname)));
  if (n_dims == 0 || n_dims > kMaxDims) {
    return DataLossError(
        fmt::format("{}: tensor '{}': n_dims {} not in [1, {}]", name_, tname, n_dims, kMaxDims));
  }
  std::array<uint64_t, kMaxDims> ne{};
  for (uint32_t d = 0; d < n_dims; ++d) {
    RETURN_IF_ERROR(Read(&ne[d], fmt::format("ne[{}] of tensor '{}'", d, tname)));
  }
  uint32_t ggml_type = 0;
  RETURN_IF_ERROR(Read(&ggml_type, fmt::format("type of tensor '{}'", tname)));
  uint64_t offset = 0;
  RETURN_IF_ERROR(Read(&offset, fmt::format("data offset of tensor '{}'", tname)));

  TensorView t;
  t.name = tname;
  const WeightFormat* format = FindWeightFormatByGgmlType(ggml_type);
  if (format == nullptr) {
    return UnimplementedError(fmt::format("unsupported tensor type {} for tensor '{}' in {}",
                                          GgmlTypeName(ggml_type), tname, name_));
  }
  t.dtype = format->dtype;
  uint64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    if (ne[d] == 0 || ne[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return DataLossError(
          fmt::format("{}: tensor '{}': invalid dimension ne[{}] = {}", name_, tname, d, ne[d]));
    }
    if (__builtin_mul_overflow(numel, ne[d], &numel) ||
        numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return DataLossError(fmt::format("{}: tensor '{}': element count overflows", name_, tname));
    }
  }
  const uint64_t block = static_cast<uint64_t>(DTypeBlockElems(t.dtype));
  if (ne[0] % block != 0) {
    return DataLossError(fmt::format(
        "{}: tensor '{}': innermost dimension {} is not a multiple of the {} block size {}", name_,
        tname, ne[0], DTypeName(t.dtype), block));
  }
  if (__builtin_mul_overflow(numel / block, static_cast<uint64_t>(DTypeBlockBytes(t.dtype)),
                             &t.nbytes)) {
    return DataLossError(fmt::format("{}: tensor '{}': byte size overflows", name_, tname));
  }
  // GGUF ne[] is innermost-first; TensorView shapes are outer-first.
  for (uint32_t d = n_dims; d-- > 0;) t.shape.push_back(static_cast<int64_t>(ne[d]));
  if (!out->tensor_index_.emplace(tname, out->tensors_.size()).second) {
    return DataLossError(fmt::format("{}: duplicate tensor name '{}'", name_, tname));
  }
  out->tensors_.push_back(std::move(t));
  offsets->push_back(offset);
  return Status::Ok();
}

Status GgufParser::Run(GgufFile* out) {
  uint32_t magic = 0;
  RETURN_IF_ERROR(Read(&magic, "magic"));
  if (std::memcmp(data_, "GGUF", 4) != 0) {
    return DataLossError(fmt::format("{}: not a GGUF file (bad magic)", name_));
  }
  RETURN_IF_ERROR(Read(&out->version_, "version"));
  if (out->version_ == 1) {
    return UnimplementedError(fmt::format(
        "{}: GGUF version 1 is not supported (32-bit counts); re-convert the model to v3", name_));
  }
  if (out->version_ != 2 && out->version_ != 3) {
    return DataLossError(fmt::format("{}: unsupported GGUF version {}", name_, out->version_));
  }
  uint64_t tensor_count = 0, kv_count = 0;
  RETURN_IF_ERROR(Read(&tensor_count, "tensor count"));
  RETURN_IF_ERROR(Read(&kv_count, "metadata key/value count"));
  // Minimum encodings: a KV is key length (8) + type (4) + a 1-byte value; a tensor info is
  // name length (8) + n_dims (4) + one ne (8) + type (4) + offset (8).
  if (kv_count > remaining() / 13) {
    return DataLossError(fmt::format("{}: metadata count {} cannot fit in the {} bytes left", name_,
                                     kv_count, remaining()));
  }
  if (tensor_count > remaining() / 32) {
    return DataLossError(fmt::format("{}: tensor count {} cannot fit in the {} bytes left", name_,
                                     tensor_count, remaining()));
  }

  out->key_order_.reserve(kv_count);
  for (uint64_t k = 0; k < kv_count; ++k) {
    std::string_view key_view;
    RETURN_IF_ERROR(ReadString(&key_view, fmt::format("key #{}", k)));
    std::string key(key_view);
    if (out->kv_.count(key) != 0) {
      return DataLossError(fmt::format("{}: duplicate metadata key '{}'", name_, key));
    }
    uint32_t raw_type = 0;
    RETURN_IF_ERROR(Read(&raw_type, fmt::format("type of key '{}'", key)));
    GgufValue value;
    RETURN_IF_ERROR(ReadValue(raw_type, &value, key));
    out->kv_.emplace(key, std::move(value));
    out->key_order_.push_back(std::move(key));
  }

  uint64_t alignment = kDefaultAlignment;
  if (const GgufValue* a = out->Find("general.alignment")) {
    if (!IsIntegerType(a->type) || a->i <= 0 || a->i > (int64_t{1} << 30) ||
        (a->i & (a->i - 1)) != 0) {
      return DataLossError(fmt::format(
          "{}: key 'general.alignment' must be a power-of-two integer in [1, 2^30]", name_));
    }
    alignment = static_cast<uint64_t>(a->i);
  }

  std::vector<uint64_t> offsets;
  out->tensors_.reserve(tensor_count);
  offsets.reserve(tensor_count);
  for (uint64_t k = 0; k < tensor_count; ++k) {
    RETURN_IF_ERROR(ReadTensorInfo(k, out, &offsets));
  }

  // pos_ <= size_ < 2^63 and alignment <= 2^30, so this cannot overflow.
  const uint64_t data_start = (pos_ + alignment - 1) / alignment * alignment;
  for (size_t k = 0; k < out->tensors_.size(); ++k) {
    TensorView& t = out->tensors_[k];
    const uint64_t off = offsets[k];
    if (off % alignment != 0) {
      return DataLossError(
          fmt::format("{}: tensor '{}': data offset {} is not a multiple of the "
                      "alignment {}",
                      name_, t.name, off, alignment));
    }
    // Offsets are relative to the data section; report absolute file offsets. 128-bit
    // arithmetic keeps a hostile offset from wrapping around.
    const unsigned __int128 begin = static_cast<unsigned __int128>(data_start) + off;
    const unsigned __int128 end = begin + t.nbytes;
    if (end > size_) {
      return DataLossError(
          fmt::format("{}: tensor '{}': data [{}, {}) beyond end of file (size {})", name_, t.name,
                      begin, end, size_));
    }
    t.data = data_ + static_cast<uint64_t>(begin);
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, MappedFile::Open(path));
  const uint8_t* data = mapped->data();
  const size_t size = mapped->size();
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, Parse(data, size, path));
  file->file_ = std::move(mapped);
  return file;
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(const uint8_t* data, size_t size,
                                                    std::string name) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->name_ = std::move(name);
  GgufParser parser(data, size, file->name_);
  RETURN_IF_ERROR(parser.Run(file.get()));
  return file;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  return it == kv_.end() ? nullptr : &it->second;
}

const TensorView* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

Status MissingKey(const std::string& file, std::string_view key) {
  return NotFoundError(fmt::format("{}: missing metadata key '{}'", file, key));
}

Status WrongType(const std::string& file, std::string_view key, const char* want,
                 const GgufValue& v) {
  return InvalidArgumentError(fmt::format("{}: metadata key '{}' is {}, expected {}", file, key,
                                          GgufTypeName(v.type), want));
}

}  // namespace

StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return MissingKey(name_, key);
  if (v->type != GgufType::kString) return WrongType(name_, key, "string", *v);
  return std::string(v->s);
}

StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return MissingKey(name_, key);
  if (!IsIntegerType(v->type)) return WrongType(name_, key, "an integer", *v);
  if (v->type == GgufType::kUint64 &&
      v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return OutOfRangeError(
        fmt::format("{}: metadata key '{}' value {} is out of range", name_, key, v->u));
  }
  return v->i;
}

StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return MissingKey(name_, key);
  if (v->type == GgufType::kFloat32 || v->type == GgufType::kFloat64) return v->f;
  if (IsUnsignedType(v->type)) return static_cast<double>(v->u);
  if (IsIntegerType(v->type)) return static_cast<double>(v->i);
  return WrongType(name_, key, "a number", *v);
}

StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return MissingKey(name_, key);
  if (v->type != GgufType::kBool) return WrongType(name_, key, "bool", *v);
  return v->i != 0;
}

StatusOr<const GgufValue*> GgufFile::GetArray(std::string_view key, GgufType element_type) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return MissingKey(name_, key);
  if (v->type != GgufType::kArray) return WrongType(name_, key, "an array", *v);
  if (v->array_type != element_type) {
    return InvalidArgumentError(fmt::format("{}: metadata key '{}' is an array of {}, expected {}",
                                            name_, key, GgufTypeName(v->array_type),
                                            GgufTypeName(element_type)));
  }
  return v;
}

}  // namespace pagellm
