#include "backend/tensor_parallel_ops.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "pagellm/check.h"

namespace pagellm {

TensorParallelOps::TensorParallelOps(ForwardOps& inner, Communicator& group,
                                     const ModelConfig& full)
    : ForwardingOps(inner),
      group_(group),
      full_vocab_(full.vocab_size),
      full_q_dim_(full.q_dim()),
      full_inter_(full.intermediate_size),
      head_dim_(full.head_dim) {
  for (int r = 0; r < group.size(); ++r) {
    StatusOr<ShardLayout> l = ComputeShardLayout(full, r, group.size());
    CHECK(l.ok()) << l.status().message();  // the shard was built from the same layout
    layouts_.push_back(*l);
  }
}

Status TensorParallelOps::TakeStatus() {
  Status s = std::move(status_);
  status_ = Status::Ok();
  return s;
}

void TensorParallelOps::TakeCommTiming(ForwardOutput* out) {
  out->comm_seconds = comm_seconds_;
  out->all_reduce_seconds = all_reduce_seconds_;
  out->num_all_reduces = num_all_reduces_;
  comm_seconds_ = all_reduce_seconds_ = 0;
  num_all_reduces_ = 0;
}

void TensorParallelOps::AllReduce(float* x, int64_t n) {
  if (!status_.ok()) return;
  const auto start = std::chrono::steady_clock::now();
  status_ = group_.AllReduceSum(x, n);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  comm_seconds_ += s;
  all_reduce_seconds_ += s;
  ++num_all_reduces_;
}

void TensorParallelOps::InputRange(int64_t width, int64_t* begin, int64_t* count) const {
  const ShardLayout& me = layouts_[group_.rank()];
  // When the two widths are equal so are the ranges (the query heads divide by the group size,
  // so ceil(I / N) = I / N is the heads' share).
  if (width == full_q_dim_) {
    *begin = me.q_head_begin * head_dim_;
    *count = me.num_q_heads * head_dim_;
  } else {
    CHECK_EQ(width, full_inter_) << "a gathered input is the attention output or the MLP's";
    *begin = me.inter_begin;
    *count = me.inter;
  }
}

void TensorParallelOps::MatMul(std::span<const MatMulOutput> outs, const float* x, int64_t rows) {
  const int64_t width = outs.front().w->input_cols;
  for (const MatMulOutput& o : outs) CHECK_EQ(o.w->input_cols, width);
  if (width == 0) {
    inner_.MatMul(outs, x, rows);
    return;
  }
  // A share of an act-order matrix's stored blocks: it reads inputs of every rank.
  int64_t begin = 0, count = 0;
  InputRange(width, &begin, &count);
  whole_input_.assign(static_cast<size_t>(rows * width), 0.0f);
  for (int64_t t = 0; t < rows; ++t)
    std::copy_n(x + t * count, count, whole_input_.data() + t * width + begin);
  AllReduce(whole_input_.data(), rows * width);
  inner_.MatMul(outs, whole_input_.data(), rows);
}

void TensorParallelOps::Embed(const WeightMatrix& table, std::span<const int32_t> ids, float* x) {
  const ShardLayout& me = layouts_[group_.rank()];
  const int64_t hidden = table.cols;
  local_ids_.clear();
  local_pos_.clear();
  for (size_t t = 0; t < ids.size(); ++t) {
    const int64_t row = ids[t] - me.vocab_begin;
    if (row < 0 || row >= me.vocab) continue;
    local_ids_.push_back(static_cast<int32_t>(row));
    local_pos_.push_back(static_cast<int64_t>(t));
  }
  local_rows_.resize(local_ids_.size() * hidden);
  inner_.Embed(table, local_ids_, local_rows_.data());
  std::fill(x, x + static_cast<int64_t>(ids.size()) * hidden, 0.0f);
  for (size_t i = 0; i < local_pos_.size(); ++i)
    std::copy_n(local_rows_.data() + i * hidden, hidden, x + local_pos_[i] * hidden);
  AllReduce(x, static_cast<int64_t>(ids.size()) * hidden);
}

void TensorParallelOps::AddAllReduced(float* x, float* y, int64_t n) {
  AllReduce(y, n);
  inner_.Add(x, y, n);
}

void TensorParallelOps::Logits(const WeightMatrix& lm_head, const float* x, int64_t rows,
                               ForwardOutput* out) {
  inner_.Logits(lm_head, x, rows, &local_logits_);
  out->logits.clear();
  out->vocab_size = full_vocab_;
  if (!status_.ok()) return;
  const std::span<const uint8_t> mine(reinterpret_cast<const uint8_t*>(local_logits_.logits.data()),
                                      local_logits_.logits.size() * sizeof(float));
  const auto start = std::chrono::steady_clock::now();
  status_ = group_.GatherToRoot(mine, &gathered_);
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!status_.ok() || group_.rank() != 0) return;
  out->logits.resize(static_cast<size_t>(rows) * full_vocab_);
  for (int r = 0; r < group_.size(); ++r) {
    const ShardLayout& l = layouts_[r];
    if (gathered_[r].size() != static_cast<size_t>(rows * l.vocab) * sizeof(float)) {
      status_ = InternalError("tensor parallelism: a rank returned logits of another shape");
      return;
    }
    const float* part = reinterpret_cast<const float*>(gathered_[r].data());
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(out->logits.data() + i * full_vocab_ + l.vocab_begin, part + i * l.vocab,
                  l.vocab * sizeof(float));
  }
}

}  // namespace pagellm
