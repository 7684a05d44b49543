#include "backend/tensor_parallel_messages.h"

#include <cstring>
#include <type_traits>

namespace pagellm {
namespace {

// Appends plain values to a message (the ranks run the same binary: native byte order).
class Writer {
 public:
  explicit Writer(TpMessageKind kind) : bytes_(1, static_cast<uint8_t>(kind)) {}
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    Append(&v, sizeof(T));
  }
  template <typename T>
  void PutArray(std::span<const T> v) {
    Put(static_cast<int64_t>(v.size()));
    Append(v.data(), v.size_bytes());
  }
  void PutString(const std::string& s) { PutArray(std::span<const char>(s.data(), s.size())); }
  std::vector<uint8_t> Take() { return std::move(bytes_); }

 private:
  void Append(const void* p, size_t n) {
    const size_t at = bytes_.size();
    bytes_.resize(at + n);
    if (n > 0) std::memcpy(bytes_.data() + at, p, n);
  }

  std::vector<uint8_t> bytes_;
};

// Reads them back; any read past the end makes ok() false (a truncated or foreign message).
class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& bytes) : bytes_(bytes), pos_(1) {}
  template <typename T>
  T Get() {
    T v{};
    if (pos_ + sizeof(T) > bytes_.size()) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <typename T>
  std::vector<T> GetArray() {
    const int64_t n = Get<int64_t>();
    if (!ok_ || n < 0 || static_cast<uint64_t>(n) > (bytes_.size() - pos_) / sizeof(T)) {
      ok_ = false;
      return {};
    }
    std::vector<T> v(static_cast<size_t>(n));
    std::memcpy(v.data(), bytes_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  std::string GetString() {
    std::vector<char> c = GetArray<char>();
    return std::string(c.begin(), c.end());
  }
  Status Done(const char* what) const {
    if (ok_ && pos_ == bytes_.size()) return Status::Ok();
    return DataLossError(std::string("tensor-parallel message ") + what + " is malformed");
  }

 private:
  const std::vector<uint8_t>& bytes_;
  size_t pos_;
  bool ok_ = true;
};

}  // namespace

std::vector<uint8_t> EncodeInit(const TpInit& m) {
  Writer w(TpMessageKind::kInit);
  w.PutString(m.model_path);
  w.Put(static_cast<int32_t>(m.load_options.float_matrix_dtype.has_value()
                                 ? static_cast<int>(*m.load_options.float_matrix_dtype)
                                 : -1));
  w.PutString(m.load_options.quantization);
  w.Put(m.max_positions);
  w.Put(m.threads);
  w.Put(m.simd_level);
  w.Put(m.pipeline_parallel_size);
  w.PutArray(std::span<const int32_t>(m.layer_partition));
  w.Put(m.min_micro_batch_tokens);
  return w.Take();
}

std::vector<uint8_t> EncodeAllocateKv(const TpAllocateKv& m) {
  Writer w(TpMessageKind::kAllocateKv);
  const KvCacheShape& s = m.shape;
  for (int v : {s.num_layers, s.num_kv_heads, s.head_dim, s.block_size, s.num_blocks})
    w.Put(static_cast<int32_t>(v));
  w.Put(static_cast<uint8_t>(s.dtype));
  w.PutArray(std::span<const int>(s.skip_layers));
  w.Put(static_cast<uint8_t>(s.skip_dtype));
  w.Put(m.num_swap_blocks);
  return w.Take();
}

std::vector<uint8_t> EncodeCopyKv(KvPool src, KvPool dst, std::span<const BlockCopy> copies) {
  Writer w(TpMessageKind::kCopyKv);
  w.Put(static_cast<uint8_t>(src));
  w.Put(static_cast<uint8_t>(dst));
  w.PutArray(copies);
  return w.Take();
}

std::vector<uint8_t> EncodePoison() {
  return Writer(TpMessageKind::kPoison).Take();
}

std::vector<uint8_t> EncodeForward(const ForwardBatch& batch) {
  Writer w(TpMessageKind::kForward);
  w.PutArray(std::span<const int32_t>(batch.token_ids));
  w.Put(static_cast<int64_t>(batch.seqs.size()));
  for (const SequenceChunk& s : batch.seqs) {
    w.Put(s.num_tokens);
    w.Put(s.start_pos);
    w.Put(static_cast<uint8_t>(s.all_logits));
    w.Put(static_cast<uint8_t>(s.hidden_states));
    w.PutArray(s.block_table);
  }
  return w.Take();
}

std::vector<uint8_t> EncodeKvCalibration(const KvCalibration& cal) {
  Writer w(TpMessageKind::kKvCalibration);
  w.Put(static_cast<int32_t>(cal.num_kv_heads));
  w.Put(static_cast<int32_t>(cal.head_dim));
  w.Put(static_cast<int64_t>(cal.k_offset.size()));
  for (size_t l = 0; l < cal.k_offset.size(); ++l) {
    w.PutArray(std::span<const float>(cal.k_offset[l]));
    w.PutArray(std::span<const float>(cal.k_smooth[l]));
    w.Put(cal.k_scale[l]);
    w.Put(cal.v_scale[l]);
  }
  return w.Take();
}

StatusOr<TpMessageKind> MessageKind(const std::vector<uint8_t>& bytes) {
  if (bytes.empty() || bytes[0] < static_cast<uint8_t>(TpMessageKind::kInit) ||
      bytes[0] > static_cast<uint8_t>(TpMessageKind::kKvCalibration))
    return DataLossError("tensor-parallel message of unknown kind");
  return static_cast<TpMessageKind>(bytes[0]);
}

StatusOr<TpInit> DecodeInit(const std::vector<uint8_t>& bytes) {
  Reader r(bytes);
  TpInit m;
  m.model_path = r.GetString();
  const int32_t dtype = r.Get<int32_t>();
  if (dtype >= 0) m.load_options.float_matrix_dtype = static_cast<DType>(dtype);
  m.load_options.quantization = r.GetString();
  m.max_positions = r.Get<int32_t>();
  m.threads = r.Get<int32_t>();
  m.simd_level = r.Get<int32_t>();
  m.pipeline_parallel_size = r.Get<int32_t>();
  m.layer_partition = r.GetArray<int32_t>();
  m.min_micro_batch_tokens = r.Get<int32_t>();
  RETURN_IF_ERROR(r.Done("init"));
  return m;
}

StatusOr<TpAllocateKv> DecodeAllocateKv(const std::vector<uint8_t>& bytes) {
  Reader r(bytes);
  TpAllocateKv m;
  KvCacheShape& s = m.shape;
  for (int* v : {&s.num_layers, &s.num_kv_heads, &s.head_dim, &s.block_size, &s.num_blocks})
    *v = r.Get<int32_t>();
  s.dtype = static_cast<KvCacheDtype>(r.Get<uint8_t>());
  s.skip_layers = r.GetArray<int>();
  s.skip_dtype = static_cast<KvCacheDtype>(r.Get<uint8_t>());
  m.num_swap_blocks = r.Get<int32_t>();
  RETURN_IF_ERROR(r.Done("allocate-kv"));
  return m;
}

StatusOr<TpCopyKv> DecodeCopyKv(const std::vector<uint8_t>& bytes) {
  Reader r(bytes);
  TpCopyKv m;
  m.src = static_cast<KvPool>(r.Get<uint8_t>());
  m.dst = static_cast<KvPool>(r.Get<uint8_t>());
  m.copies = r.GetArray<BlockCopy>();
  RETURN_IF_ERROR(r.Done("copy-kv"));
  return m;
}

StatusOr<KvCalibration> DecodeKvCalibration(const std::vector<uint8_t>& bytes) {
  Reader r(bytes);
  KvCalibration cal;
  cal.num_kv_heads = r.Get<int32_t>();
  cal.head_dim = r.Get<int32_t>();
  const int64_t layers = r.Get<int64_t>();
  if (layers < 0 || layers > static_cast<int64_t>(bytes.size()))
    return DataLossError("tensor-parallel message kv-calibration is malformed");
  for (int64_t l = 0; l < layers; ++l) {
    cal.k_offset.push_back(r.GetArray<float>());
    cal.k_smooth.push_back(r.GetArray<float>());
    cal.k_scale.push_back(r.Get<float>());
    cal.v_scale.push_back(r.Get<float>());
  }
  RETURN_IF_ERROR(r.Done("kv-calibration"));
  return cal;
}

Status DecodeForward(const std::vector<uint8_t>& bytes, TpForward* out) {
  Reader r(bytes);
  out->batch.token_ids = r.GetArray<int32_t>();
  const int64_t n = r.Get<int64_t>();
  if (n < 0 || n > static_cast<int64_t>(bytes.size()))
    return DataLossError("tensor-parallel message forward is malformed");
  out->batch.seqs.resize(static_cast<size_t>(n));
  out->block_tables.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    SequenceChunk& s = out->batch.seqs[i];
    s.num_tokens = r.Get<int32_t>();
    s.start_pos = r.Get<int32_t>();
    s.all_logits = r.Get<uint8_t>() != 0;
    s.hidden_states = r.Get<uint8_t>() != 0;
    out->block_tables[i] = r.GetArray<int32_t>();
    s.block_table = out->block_tables[i];
  }
  return r.Done("forward");
}

}  // namespace pagellm
