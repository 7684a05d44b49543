// The ForwardOps of one rank of a tensor-parallel group: the rank's own ops (CpuOps over its
// shard, model/tensor_parallel_shard.h) plus the three places where ranks meet:
//   Embed          each rank embeds the tokens of its vocabulary range (zero rows for the
//                  others), then the rows are summed over the ranks;
//   AddAllReduced  the partial attention-output / MLP-down projections are summed over the
//                  ranks (rank order, dist/communicator.h) before the residual add;
//   Logits         each rank projects onto its vocabulary range; rank 0 gathers the ranges into
//                  the [rows][vocab] logits (the other ranks' outputs stay empty).
// and one more for GPTQ act-order checkpoints:
//   MatMul         a row-parallel act-order matrix (WeightMatrix::input_cols) multiplies the
//                  whole input: each rank's columns are summed into it over the ranks (zeros
//                  elsewhere, so the sum is exact) before the rank's share of stored blocks
//                  is applied (model/tensor_parallel_shard.h).
// Everything else is the rank's own work. A failed collective is kept (status()) and the later
// ones of the step are skipped; the step's output is then meaningless and the backend returns
// the error. The wall time spent inside the collectives is counted (TakeCommTiming).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dist/communicator.h"
#include "model/forwarding_ops.h"
#include "model/tensor_parallel_shard.h"
#include "pagellm/status.h"

namespace pagellm {

class TensorParallelOps : public ForwardingOps {
 public:
  // `inner` and `group` must outlive the ops; `full` is the unsplit model's config.
  TensorParallelOps(ForwardOps& inner, Communicator& group, const ModelConfig& full);

  // The first collective failure since the last call, then Ok again.
  Status TakeStatus();
  // Sets out's comm_seconds, all_reduce_seconds and num_all_reduces to the time spent in
  // collectives since the last call (and the all-reduces run), then starts counting again.
  void TakeCommTiming(ForwardOutput* out);

  void Embed(const WeightMatrix& table, std::span<const int32_t> ids, float* x) override;
  void MatMul(std::span<const MatMulOutput> outs, const float* x, int64_t rows) override;
  void AddAllReduced(float* x, float* y, int64_t n) override;
  // Sums x [n] over the ranks unless a collective of this step already failed.
  void AllReduce(float* x, int64_t n) override;
  void Logits(const WeightMatrix& lm_head, const float* x, int64_t rows,
              ForwardOutput* out) override;

 private:
  // This rank's columns [begin, begin + count) of an input `width` wide that a row-parallel
  // matrix multiplies: the attention output (query heads) or the MLP intermediate.
  void InputRange(int64_t width, int64_t* begin, int64_t* count) const;

  Communicator& group_;
  const int32_t full_vocab_;
  const int64_t full_q_dim_, full_inter_, head_dim_;
  std::vector<ShardLayout> layouts_;  // every rank's ranges (rank 0 places their logits)
  Status status_;
  std::vector<int32_t> local_ids_;  // Embed: this rank's tokens, as rows of its table
  std::vector<int64_t> local_pos_;  //        and their positions in the batch
  std::vector<float> local_rows_;   //        their embeddings [n][hidden]
  ForwardOutput local_logits_;      // Logits: this rank's [rows][its vocab]
  std::vector<std::vector<uint8_t>> gathered_;
  std::vector<float> whole_input_;  // MatMul: [rows][input_cols], summed over the ranks
  double comm_seconds_ = 0, all_reduce_seconds_ = 0;
  int32_t num_all_reduces_ = 0;
};

}  // namespace pagellm
