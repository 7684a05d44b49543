// What one stage of a pipeline-parallel split holds of a model: a contiguous run of its decoder
// layers; the first stage also the embedding, the last stage the final norm and lm_head (and,
// with tied embeddings, the embedding table lm_head shares). Each stage passes its residual
// stream to the next (ForwardOps::SendStageOutput / ReceiveStageInput).
//
// The layers are split as vLLM splits them (vllm/distributed/utils.py, get_pp_indices):
// num_layers / stages each, and the remainder one more to each stage counted back from the
// second-to-last (the last stage keeps lm_head's work off its share), or as an explicit list
// (PAGELLM_PP_LAYER_PARTITION, vLLM's VLLM_PP_LAYER_PARTITION: "8,8").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model_weights.h"
#include "pagellm/status.h"

namespace pagellm {

struct StageLayout {
  int stage = 0;
  int num_stages = 1;
  int layer_begin = 0, layer_end = 0;  // decoder layers [layer_begin, layer_end)
  int num_layers() const { return layer_end - layer_begin; }
  bool first() const { return stage == 0; }
  bool last() const { return stage == num_stages - 1; }
};

// Layers per stage: `partition` when given (its length must be num_stages, its sum num_layers,
// every entry >= 1), else vLLM's rule above. InvalidArgument naming the numbers otherwise (a
// stage without layers included).
StatusOr<std::vector<int>> PartitionLayers(int num_layers, int num_stages,
                                           const std::vector<int>& partition);

// "8,8" as a list of layer counts; "" is an empty list.
StatusOr<std::vector<int>> ParseLayerPartition(const std::string& text);

// The partition named by PAGELLM_PP_LAYER_PARTITION (or, when unset, vLLM's
// VLLM_PP_LAYER_PARTITION); empty when neither is set.
StatusOr<std::vector<int>> LayerPartitionFromEnvironment();

// Stage `stage` of `partition` (from PartitionLayers).
StageLayout StageOf(const std::vector<int>& partition, int stage);

// Stage `l.stage`'s model: the full model's config, its layers [l.layer_begin, l.layer_end)
// (ModelWeights::layer_begin), and the embedding / final norm / lm_head as above; matrices are
// views into `full` (which must outlive it), nothing is copied but norms. total_bytes counts
// what the stage holds.
std::unique_ptr<LoadedModel> StageModel(const LoadedModel& full, const StageLayout& l);

// The bytes of weight matrices `w` holds (ModelWeights::total_bytes of a partial model): the
// embedding, lm_head unless tied, and every matrix of its layers.
int64_t HeldWeightBytes(const ModelWeights& w, bool tied);

}  // namespace pagellm
