#include "model/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "fmt/format.h"
#include "kernels/weight_format.h"
#include "pagellm/check.h"

namespace pagellm {
namespace {

// Buffered little-endian output to a FILE.
class Out {
 public:
  explicit Out(std::FILE* f) : f_(f) {}
  template <typename T>
  void Put(T v) {
    Bytes(&v, sizeof(v));
  }
  void Str(std::string_view s) {
    Put<uint64_t>(s.size());
    Bytes(s.data(), s.size());
  }
  void Bytes(const void* p, size_t n) {
    if (std::fwrite(p, 1, n, f_) != n) ok_ = false;
    pos_ += n;
  }
  void PadTo(uint64_t alignment) {
    static const uint8_t zeros[256] = {};
    while (pos_ % alignment != 0)
      Bytes(zeros, std::min<uint64_t>(256, alignment - pos_ % alignment));
  }
  bool ok() const { return ok_; }

 private:
  std::FILE* f_;
  uint64_t pos_ = 0;
  bool ok_ = true;
};

void PutScalar(Out& out, GgufType type, const GgufValue& v) {
  switch (type) {
    case GgufType::kUint8:
      out.Put<uint8_t>(static_cast<uint8_t>(v.u));
      break;
    case GgufType::kInt8:
      out.Put<int8_t>(static_cast<int8_t>(v.i));
      break;
    case GgufType::kUint16:
      out.Put<uint16_t>(static_cast<uint16_t>(v.u));
      break;
    case GgufType::kInt16:
      out.Put<int16_t>(static_cast<int16_t>(v.i));
      break;
    case GgufType::kUint32:
      out.Put<uint32_t>(static_cast<uint32_t>(v.u));
      break;
    case GgufType::kInt32:
      out.Put<int32_t>(static_cast<int32_t>(v.i));
      break;
    case GgufType::kFloat32:
      out.Put<float>(static_cast<float>(v.f));
      break;
    case GgufType::kBool:
      out.Put<uint8_t>(v.i != 0);
      break;
    case GgufType::kString:
      out.Str(v.s);
      break;
    case GgufType::kUint64:
      out.Put<uint64_t>(v.u);
      break;
    case GgufType::kInt64:
      out.Put<int64_t>(v.i);
      break;
    case GgufType::kFloat64:
      out.Put<double>(v.f);
      break;
    case GgufType::kArray:
      CHECK(false) << "nested GGUF array";
  }
}

void PutValue(Out& out, const GgufValue& v) {
  out.Put<uint32_t>(static_cast<uint32_t>(v.type));
  if (v.type != GgufType::kArray) {
    PutScalar(out, v.type, v);
    return;
  }
  out.Put<uint32_t>(static_cast<uint32_t>(v.array_type));
  GgufValue e;
  switch (v.array_type) {
    case GgufType::kString:
      out.Put<uint64_t>(v.strings.size());
      for (std::string_view s : v.strings) out.Str(s);
      break;
    case GgufType::kFloat32:
    case GgufType::kFloat64:
      out.Put<uint64_t>(v.floats.size());
      for (float f : v.floats) {
        e.f = f;
        PutScalar(out, v.array_type, e);
      }
      break;
    default:  // integers and bool
      out.Put<uint64_t>(v.ints.size());
      for (int64_t x : v.ints) {
        e.i = x;
        e.u = static_cast<uint64_t>(x);
        PutScalar(out, v.array_type, e);
      }
      break;
  }
}

}  // namespace

void GgufWriter::CopyMetadata(const GgufFile& source) {
  for (const std::string& key : source.keys()) {
    const GgufValue* v = source.Find(key);
    CHECK(v != nullptr);
    entries_.push_back({key, *v, {}});
    if (key == "general.alignment" && v->u > 0) alignment_ = v->u;
  }
}

void GgufWriter::SetUint32(const std::string& key, uint32_t value) {
  GgufValue v;
  v.type = GgufType::kUint32;
  v.u = value;
  v.i = value;
  for (Entry& e : entries_)
    if (e.key == key) {
      e.value = v;
      return;
    }
  entries_.push_back({key, v, {}});
}

void GgufWriter::AddTensor(std::string name, DType dtype, std::vector<int64_t> shape, FillFn fill) {
  CHECK(!shape.empty());
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  const uint64_t nbytes = static_cast<uint64_t>(rows * DTypeRowBytes(dtype, shape.back()));
  tensors_.push_back({std::move(name), dtype, std::move(shape), nbytes, std::move(fill)});
}

Status GgufWriter::Write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(tmp.c_str(), "wb"), std::fclose);
  if (!f)
    return InvalidArgumentError(fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)));
  Out out(f.get());
  out.Bytes("GGUF", 4);
  out.Put<uint32_t>(3);
  out.Put<uint64_t>(tensors_.size());
  out.Put<uint64_t>(entries_.size());
  for (const Entry& e : entries_) {
    out.Str(e.key);
    PutValue(out, e.value);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    out.Str(t.name);
    out.Put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (size_t i = t.shape.size(); i-- > 0;) out.Put<uint64_t>(static_cast<uint64_t>(t.shape[i]));
    out.Put<uint32_t>(static_cast<uint32_t>(GetWeightFormat(t.dtype).ggml_type));
    out.Put<uint64_t>(offset);
    offset += (t.nbytes + alignment_ - 1) / alignment_ * alignment_;
  }
  out.PadTo(alignment_);
  std::vector<uint8_t> buf;
  for (const Tensor& t : tensors_) {
    buf.assign(t.nbytes, 0);
    Status st = t.fill(buf.data());
    if (!st.ok()) {
      std::filesystem::remove(tmp);
      return st;
    }
    out.Bytes(buf.data(), buf.size());
    out.PadTo(alignment_);
  }
  if (!out.ok() || std::fflush(f.get()) != 0) {
    std::filesystem::remove(tmp);
    return InvalidArgumentError(fmt::format("{}: write failed: {}", tmp, std::strerror(errno)));
  }
  f.reset();
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    return InvalidArgumentError(
        fmt::format("{}: cannot rename to {}: {}", tmp, path, ec.message()));
  return Status::Ok();
}

}  // namespace pagellm
