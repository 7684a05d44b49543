#include "model/pipeline_stage.h"

#include <cstdlib>
#include <numeric>

#include "fmt/format.h"
#include "model/gguf_file.h"
#include "model/safetensors_file.h"
#include "pagellm/check.h"

namespace pagellm {

StatusOr<std::vector<int>> PartitionLayers(int num_layers, int num_stages,
                                           const std::vector<int>& partition) {
  if (num_stages < 1)
    return InvalidArgumentError(
        fmt::format("--pipeline-parallel-size {} must be >= 1", num_stages));
  if (!partition.empty()) {
    if (static_cast<int>(partition.size()) != num_stages)
      return InvalidArgumentError(fmt::format(
          "PAGELLM_PP_LAYER_PARTITION lists {} stages but --pipeline-parallel-size is {}",
          partition.size(), num_stages));
    if (std::accumulate(partition.begin(), partition.end(), 0) != num_layers)
      return InvalidArgumentError(
          fmt::format("PAGELLM_PP_LAYER_PARTITION adds up to {} layers but the model has {}",
                      std::accumulate(partition.begin(), partition.end(), 0), num_layers));
    for (int n : partition)
      if (n < 1) return InvalidArgumentError("PAGELLM_PP_LAYER_PARTITION gives a stage no layers");
    return partition;
  }
  if (num_layers < num_stages)
    return InvalidArgumentError(fmt::format(
        "--pipeline-parallel-size {}: the model has only {} layers (a stage needs at least one)",
        num_stages, num_layers));
  std::vector<int> p(num_stages, num_layers / num_stages);
  // vLLM: the remaining layers go to stages -2, -3, ... (never the last, which runs lm_head).
  const int remaining = num_layers % num_stages;
  for (int i = 2; i < remaining + 2; ++i) ++p[num_stages - i];
  return p;
}

StatusOr<std::vector<int>> ParseLayerPartition(const std::string& text) {
  std::vector<int> counts;
  size_t pos = 0;
  while (!text.empty() && pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    char* end = nullptr;
    const long n = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || n < 0 || n > 100000)
      return InvalidArgumentError(fmt::format(
          "layer partition '{}': '{}' is not a layer count (expected e.g. 8,8)", text, item));
    counts.push_back(static_cast<int>(n));
    pos = comma + 1;
  }
  return counts;
}

StatusOr<std::vector<int>> LayerPartitionFromEnvironment() {
  for (const char* name : {"PAGELLM_PP_LAYER_PARTITION", "VLLM_PP_LAYER_PARTITION"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    StatusOr<std::vector<int>> p = ParseLayerPartition(value);
    if (!p.ok()) return p.status().WithContext(name);
    return p;
  }
  return std::vector<int>();
}

StageLayout StageOf(const std::vector<int>& partition, int stage) {
  CHECK(stage >= 0 && stage < static_cast<int>(partition.size())) << "stage " << stage;
  StageLayout l;
  l.stage = stage;
  l.num_stages = static_cast<int>(partition.size());
  l.layer_begin = std::accumulate(partition.begin(), partition.begin() + stage, 0);
  l.layer_end = l.layer_begin + partition[stage];
  return l;
}

int64_t HeldWeightBytes(const ModelWeights& w, bool tied) {
  int64_t bytes = w.embed.nbytes();
  // Tied: lm_head is the embedding's bytes, counted once (a last stage holds the table for it).
  if (!tied || w.embed.data == nullptr) bytes += w.lm_head.nbytes();
  for (const LayerWeights& s : w.layers) {
    for (const WeightMatrix* m :
         {&s.wq, &s.wk, &s.wv, &s.wo, &s.w_gate, &s.w_up, &s.w_down, &s.moe.router,
          &s.moe.shared_gate, &s.moe.shared_up, &s.moe.shared_down})
      bytes += m->nbytes();
    for (const std::vector<WeightMatrix>* experts : {&s.moe.gate, &s.moe.up, &s.moe.down})
      for (const WeightMatrix& m : *experts) bytes += m.nbytes();
  }
  return bytes;
}

std::unique_ptr<LoadedModel> StageModel(const LoadedModel& full, const StageLayout& l) {
  CHECK(l.layer_begin >= 0 && l.layer_begin < l.layer_end &&
        l.layer_end <= static_cast<int>(full.weights.layers.size()))
      << "stage layers [" << l.layer_begin << ", " << l.layer_end << ")";
  auto stage = std::make_unique<LoadedModel>();
  stage->path = full.path;
  stage->format = full.format;
  stage->load_options = full.load_options;
  stage->config = full.config;
  stage->generation_defaults = full.generation_defaults;
  stage->quantization = full.quantization;
  const ModelWeights& fw = full.weights;
  ModelWeights& w = stage->weights;
  w.layer_begin = l.layer_begin;
  w.layers.assign(fw.layers.begin() + l.layer_begin, fw.layers.begin() + l.layer_end);
  const bool tied = full.config.tie_word_embeddings;
  if (l.first() || (l.last() && tied)) w.embed = fw.embed;
  if (l.last()) {
    w.final_norm = fw.final_norm;
    w.lm_head = fw.lm_head;
  }
  w.total_bytes = HeldWeightBytes(w, tied);
  w.num_parameters = fw.num_parameters;
  return stage;
}

}  // namespace pagellm
