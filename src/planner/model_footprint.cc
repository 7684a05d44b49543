#include "planner/model_footprint.h"

#include <fmt/format.h>

#include <algorithm>

#include "model/arch_spec.h"
#include "model/pipeline_stage.h"
#include "pagellm/check.h"

namespace pagellm {

Status ValidateTensorParallel(const ModelConfig& c, int tp) {
  if (tp < 1) {
    return InvalidArgumentError(fmt::format("--tensor-parallel-size {} must be >= 1", tp));
  }
  if (c.num_heads % tp != 0) {
    return InvalidArgumentError(
        fmt::format("--tensor-parallel-size {}: the model's {} attention heads are not divisible "
                    "by it",
                    tp, c.num_heads));
  }
  if (c.num_kv_heads % tp != 0 && tp % c.num_kv_heads != 0) {
    return InvalidArgumentError(fmt::format(
        "--tensor-parallel-size {}: the model's {} KV heads can neither be split evenly nor "
        "replicated evenly across it",
        tp, c.num_kv_heads));
  }
  return Status::Ok();
}

int KvHeadsPerDevice(const ModelConfig& c, int tp) {
  CHECK_GE(tp, 1);
  return (c.num_kv_heads + tp - 1) / tp;
}

WeightsFootprint EstimateWeights(const ModelConfig& c, int64_t bytes_per_parameter, int tp, int pp,
                                 const std::vector<int>& partition) {
  CHECK(ValidateTensorParallel(c, tp).ok()) << "invalid tensor-parallel split";
  const int64_t inter = c.intermediate_size, vocab = c.vocab_size;
  // Heads split by tp (KV heads replicated when fewer than tp); MLP rows and vocab rounded up.
  const ShardDims full{c.q_dim(), c.kv_dim(), inter, vocab};
  // Every expert's (and the shared expert's) intermediate split like the MLP's.
  const ShardDims rank{c.q_dim() / tp,
                       int64_t{KvHeadsPerDevice(c, tp)} * c.head_dim,
                       (inter + tp - 1) / tp,
                       (vocab + tp - 1) / tp,
                       (int64_t{c.moe.expert_intermediate} + tp - 1) / tp,
                       (int64_t{c.moe.shared_expert_intermediate} + tp - 1) / tp};
  const ArchSpec& spec = GetArchSpec(c.arch);

  WeightsFootprint w;
  w.num_parameters = spec.count_parameters(c, full);
  w.num_parameters_per_device = spec.count_parameters(c, rank);
  if (pp > 1) {
    StatusOr<std::vector<int>> stages = PartitionLayers(c.num_layers, pp, partition);
    CHECK(stages.ok()) << stages.status().message();
    // The layers [begin, end) of a rank: the count up to `end` layers less the count up to
    // `begin` (the embedding, lm_head and final norm cancel; per-layer kinds stay exact).
    auto upto = [&](int layers) {
      ModelConfig head = c;
      head.num_layers = layers;
      return spec.count_parameters(head, rank);
    };
    const int64_t table = rank.vocab * int64_t{c.hidden_size};
    w.num_parameters_per_device = 0;
    for (int s = 0; s < pp; ++s) {
      const StageLayout l = StageOf(*stages, s);
      int64_t n = upto(l.layer_end) - upto(l.layer_begin);
      if (l.first() || (l.last() && c.tie_word_embeddings)) n += table;
      if (l.last()) n += (c.tie_word_embeddings ? 0 : table) + c.hidden_size;
      w.num_parameters_per_device = std::max(w.num_parameters_per_device, n);
    }
  }
  w.bytes = w.num_parameters * bytes_per_parameter;
  w.bytes_per_device = w.num_parameters_per_device * bytes_per_parameter;
  return w;
}

WeightsFootprint WeightsFromTotal(int64_t total_bytes, int64_t num_parameters, int tp) {
  CHECK_GE(tp, 1);
  WeightsFootprint w;
  w.num_parameters = num_parameters;
  w.num_parameters_per_device = (num_parameters + tp - 1) / tp;
  w.bytes = total_bytes;
  w.bytes_per_device = (total_bytes + tp - 1) / tp;
  return w;
}

int64_t EstimateGpuActivationBytes(const ModelConfig& c, int64_t max_num_batched_tokens,
                                   int64_t max_num_seqs, int tp, int64_t act_bytes) {
  CHECK_GE(tp, 1);
  const int64_t t = max_num_batched_tokens;
  const int64_t rows = std::min(max_num_seqs, t);
  const int64_t kv_dim_rank = int64_t{KvHeadsPerDevice(c, tp)} * c.head_dim;
  const int64_t per_token = 3 * int64_t{c.hidden_size} +
                            (2 * c.q_dim() + 3 * int64_t{c.intermediate_size}) / tp +
                            2 * kv_dim_rank;
  constexpr int64_t kLogitBytes = 4;  // logits are float32 whatever the model dtype
  return t * per_token * act_bytes +
         rows * (int64_t{c.hidden_size} * act_bytes + 2 * int64_t{c.vocab_size} * kLogitBytes);
}

}  // namespace pagellm
