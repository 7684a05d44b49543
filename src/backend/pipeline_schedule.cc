#include "backend/pipeline_schedule.h"

#include <algorithm>
#include <cstring>

#include "pagellm/check.h"

namespace pagellm {

std::vector<MicroBatch> PlanMicroBatches(const ForwardBatch& batch, int num_stages,
                                         int min_tokens) {
  const int n = static_cast<int>(batch.seqs.size());
  const int64_t total = static_cast<int64_t>(batch.token_ids.size());
  int64_t count = std::min(num_stages, n);
  if (min_tokens > 0) count = std::min<int64_t>(count, std::max<int64_t>(1, total / min_tokens));
  std::vector<MicroBatch> out;
  if (n == 0) return out;
  int s = 0;
  int64_t t = 0;
  for (int64_t k = 0; k < count; ++k) {
    MicroBatch m{s, s, t, t};
    const int64_t share = total * (k + 1) / count;
    // At least one sequence each, and enough left for the micro-batches after this one.
    const int last_allowed = n - static_cast<int>(count - 1 - k);
    do {
      m.token_end += batch.seqs[s].num_tokens;
      ++s;
    } while (s < last_allowed && m.token_end < share);
    m.seq_end = s;
    t = m.token_end;
    out.push_back(m);
  }
  CHECK_EQ(s, n);
  return out;
}

ForwardBatch MicroBatchOf(const ForwardBatch& batch, const MicroBatch& m) {
  ForwardBatch b;
  b.token_ids.assign(batch.token_ids.begin() + m.token_begin,
                     batch.token_ids.begin() + m.token_end);
  b.seqs.assign(batch.seqs.begin() + m.seq_begin, batch.seqs.begin() + m.seq_end);
  return b;
}

void AppendOutput(const ForwardOutput& part, ForwardOutput* whole) {
  const int64_t rows =
      part.vocab_size > 0 ? static_cast<int64_t>(whole->logits.size()) / part.vocab_size : 0;
  const int64_t hidden_rows =
      part.hidden_size > 0 ? static_cast<int64_t>(whole->hidden.size()) / part.hidden_size : 0;
  for (int32_t r : part.row_offset) whole->row_offset.push_back(static_cast<int32_t>(r + rows));
  for (int32_t r : part.hidden_offset)
    whole->hidden_offset.push_back(r < 0 ? -1 : static_cast<int32_t>(r + hidden_rows));
  whole->logits.insert(whole->logits.end(), part.logits.begin(), part.logits.end());
  whole->hidden.insert(whole->hidden.end(), part.hidden.begin(), part.hidden.end());
  whole->vocab_size = part.vocab_size;
  whole->hidden_size = part.hidden_size;
}

namespace {

template <typename T>
void Put(std::vector<uint8_t>* bytes, const T* data, int64_t n) {
  const size_t at = bytes->size();
  bytes->resize(at + sizeof(int64_t) + n * sizeof(T));
  std::memcpy(bytes->data() + at, &n, sizeof(int64_t));
  if (n > 0) std::memcpy(bytes->data() + at + sizeof(int64_t), data, n * sizeof(T));
}

template <typename T>
bool Get(const std::vector<uint8_t>& bytes, size_t* pos, std::vector<T>* v) {
  int64_t n = 0;
  if (*pos + sizeof(int64_t) > bytes.size()) return false;
  std::memcpy(&n, bytes.data() + *pos, sizeof(int64_t));
  *pos += sizeof(int64_t);
  if (n < 0 || static_cast<uint64_t>(n) > (bytes.size() - *pos) / sizeof(T)) return false;
  v->resize(static_cast<size_t>(n));
  if (n > 0) std::memcpy(v->data(), bytes.data() + *pos, n * sizeof(T));
  *pos += n * sizeof(T);
  return true;
}

}  // namespace

std::vector<uint8_t> EncodeOutput(const ForwardOutput& out) {
  std::vector<uint8_t> bytes;
  const int32_t sizes[2] = {out.vocab_size, out.hidden_size};
  Put(&bytes, sizes, 2);
  Put(&bytes, out.logits.data(), static_cast<int64_t>(out.logits.size()));
  Put(&bytes, out.row_offset.data(), static_cast<int64_t>(out.row_offset.size()));
  Put(&bytes, out.hidden.data(), static_cast<int64_t>(out.hidden.size()));
  Put(&bytes, out.hidden_offset.data(), static_cast<int64_t>(out.hidden_offset.size()));
  return bytes;
}

Status DecodeOutput(const std::vector<uint8_t>& bytes, ForwardOutput* out) {
  size_t pos = 0;
  std::vector<int32_t> sizes;
  const bool ok = Get(bytes, &pos, &sizes) && sizes.size() == 2 && Get(bytes, &pos, &out->logits) &&
                  Get(bytes, &pos, &out->row_offset) && Get(bytes, &pos, &out->hidden) &&
                  Get(bytes, &pos, &out->hidden_offset) && pos == bytes.size();
  if (!ok) return DataLossError("pipeline-parallel output message is malformed");
  out->vocab_size = sizes[0];
  out->hidden_size = sizes[1];
  if (out->vocab_size < 0 || out->hidden_size < 0 ||
      (out->vocab_size > 0 && out->logits.size() % out->vocab_size != 0))
    return DataLossError("pipeline-parallel output message is malformed");
  return Status::Ok();
}

}  // namespace pagellm
