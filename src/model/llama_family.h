// The ArchSpec hooks (model/arch_spec.h) of the Llama-family decoders: Llama 1/2/3 and SmolLM,
// Mistral (a sliding window), Qwen2/2.5 (q/k/v biases) and Qwen3 (per-head q/k RMSNorm). They
// share tensor names, weight binding, parameter count and the graph (model/decoder_graph.h);
// only their config.json fields and the spec's flags differ.
#pragma once

#include <cstdint>
#include <string>

#include "model/arch_spec.h"

namespace pagellm {

extern const ArchTensorNames kLlamaHfTensors;
extern const ArchTensorNames kLlamaGgufTensors;

Status ParseLlamaHfFields(const JsonFields& fields, const std::string& source, ModelConfig* config);
Status ParseMistralHfFields(const JsonFields& fields, const std::string& source,
                            ModelConfig* config);
Status ParseQwen2HfFields(const JsonFields& fields, const std::string& source, ModelConfig* config);
Status ParseQwen3HfFields(const JsonFields& fields, const std::string& source, ModelConfig* config);

Status BindLlamaFamilyWeights(const ArchTensorNames& names, TensorBinder& binder,
                              ModelConfig* config, ModelWeights* weights);
int64_t CountLlamaFamilyParameters(const ModelConfig& config, const ShardDims& dims);
// The output head every family binds the same way: lm_head, or the embedding when the config
// ties them or the file has no lm_head (then tie_word_embeddings is set); also records the
// model's weight dtype (that of layer 0's q_proj). Call after embed and the layers are bound.
Status BindOutputHead(const ArchTensorNames& names, TensorBinder& binder, ModelConfig* config,
                      ModelWeights* weights);

}  // namespace pagellm
