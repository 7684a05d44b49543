// Non-KV memory of a deployment: weights (from the model's shapes, for a config without
// weight files) and the activation peak of one engine step on a GPU.
//
// Tensor parallelism (Megatron-style, as vLLM shards Llama): q/o projections and the MLP are
// split across the `tp` ranks, the embedding and lm_head by vocabulary rows; RMSNorm weights
// are replicated; K/V projections are split by KV head, and when tp > num_kv_heads each rank
// keeps ceil(num_kv_heads / tp) = 1 whole head (vLLM replicates KV heads then).
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"
#include "pagellm/status.h"

namespace pagellm {

// Checks what vLLM requires of a tensor-parallel split: tp >= 1, num_heads divisible by tp,
// and either num_kv_heads divisible by tp or tp divisible by num_kv_heads. InvalidArgument
// with the numbers otherwise.
Status ValidateTensorParallel(const ModelConfig& config, int tp);

// KV heads one rank stores: ceil(num_kv_heads / tp).
int KvHeadsPerDevice(const ModelConfig& config, int tp);

struct WeightsFootprint {
  int64_t num_parameters = 0;             // whole model
  int64_t num_parameters_per_device = 0;  // the largest rank's share
  int64_t bytes = 0;                      // whole model, bytes_per_parameter each
  int64_t bytes_per_device = 0;
};

// Parameters from the shapes: embedding (vocab x hidden), lm_head unless tied, per layer
// q (q_dim x hidden), k and v (kv_dim x hidden), o (hidden x q_dim), gate and up
// (intermediate x hidden), down (hidden x intermediate), two RMSNorm vectors (hidden), q/k/v
// biases when attention_bias, and the final norm. Requires ValidateTensorParallel(config, tp).
// With pp > 1 pipeline stages (layers per stage: PartitionLayers(num_layers, pp, partition),
// which must succeed), a device holds its stage's layers, the embedding on the first stage, the
// final norm and lm_head on the last (the embedding table too when tied); per device is the
// largest stage's.
WeightsFootprint EstimateWeights(const ModelConfig& config, int64_t bytes_per_parameter, int tp,
                                 int pp = 1, const std::vector<int>& partition = {});

// Weights known in total (read from files: quantised GGUF, mixed dtypes): each of the tp
// devices (tp x pp with pipeline stages) holds ceil(total / tp) bytes. This ignores replicated
// norms, which are < 0.01% of a model, and uneven stages.
WeightsFootprint WeightsFromTotal(int64_t total_bytes, int64_t num_parameters, int tp);

// Activation peak of one forward step on one GPU rank, for T = max_num_batched_tokens tokens
// and R = min(max_num_seqs, T) sampled rows, with `act_bytes` per activation (2 for bf16/fp16):
//
//   T x (3 x hidden + (2 x q_dim + 3 x intermediate) / tp + 2 x kv_dim_rank) x act_bytes
//     + R x (hidden x act_bytes + 2 x vocab x 4)
//
// The first term is one layer's live tensors (residual, normed input and o/down output at full
// width; q, attention output, k, v, gate|up and the SiLU product at the rank's width); layers
// run one after another so one layer is the peak. The second is the final norm of the sampled
// rows and their float32 logits plus one working copy for the sampler. kv_dim_rank =
// KvHeadsPerDevice x head_dim. It does not include the CUDA context, NCCL and cuBLAS workspaces or
// CUDA-graph pools, which vLLM measures at start-up (typically 0.5-2 GiB per GPU); pass a measured
// number
// (--activation-memory) when you have one.
int64_t EstimateGpuActivationBytes(const ModelConfig& config, int64_t max_num_batched_tokens,
                                   int64_t max_num_seqs, int tp, int64_t act_bytes);

}  // namespace pagellm
