// What one rank of a tensor-parallel group holds of a model (the Megatron split, as vLLM
// splits a Llama): its query heads and the KV heads they read (KV heads replicated when the
// group is larger than their count), the matching input columns of the attention output
// projection, its share of the MLP's intermediate columns (gate/up rows, down input columns)
// and of the vocabulary (embedding and lm_head rows). Norms are replicated. Each rank's
// attention output and MLP down projections are then partial sums that the ranks add up
// (all-reduce); the embedding of a token outside a rank's vocabulary range is zero there.
#pragma once

#include <cstdint>
#include <memory>

#include "model/model_weights.h"
#include "pagellm/status.h"

namespace pagellm {

// Rank `rank`'s ranges in a group of `size` (each [begin, begin + count)).
struct ShardLayout {
  int rank = 0;
  int size = 1;
  int q_head_begin = 0, num_q_heads = 0;
  int kv_head_begin = 0, num_kv_heads = 0;
  int64_t inter_begin = 0, inter = 0;  // MLP intermediate columns
  // Columns of every expert's intermediate (MoeConfig::expert_intermediate) and of the shared
  // expert's (shared_expert_intermediate); 0 for a dense model (no shared expert).
  int64_t expert_inter_begin = 0, expert_inter = 0;
  int64_t shared_inter_begin = 0, shared_inter = 0;
  int64_t vocab_begin = 0, vocab = 0;  // vocabulary rows of the embedding and lm_head
};

// InvalidArgument when `size` does not split the heads (query heads must divide by it; KV heads
// must divide by it or it by them) or leaves any rank of the group (not only `rank`) no columns
// of the MLP, of an expert or of the shared expert, or no vocabulary rows; the intermediate
// (dense, expert, shared expert) and vocabulary shares are ceil(n / size) (the last rank's may
// be shorter).
StatusOr<ShardLayout> ComputeShardLayout(const ModelConfig& config, int rank, int size);

// Rank `layout.rank`'s shard of `full` (which must outlive it): a model of its own config
// (heads, intermediate and vocab counts of the shard) whose row ranges are views into `full`'s
// mapped files and whose column ranges (attention output, MLP down) are copies of just those
// columns (the experts' down projections included). A dense layer's GPTQ act-order o_proj /
// down_proj (an input permutation) is split by its stored blocks instead: the shard's matrix
// has a share of them and multiplies the whole input (WeightMatrix::input_cols), which
// TensorParallelOps gathers. Unimplemented for what cannot be split here: act-order experts,
// column ranges that cut a quantization block, and act-order matrices with fewer stored
// blocks than ranks.
StatusOr<std::unique_ptr<LoadedModel>> ShardModel(const LoadedModel& full,
                                                  const ShardLayout& layout);

}  // namespace pagellm
