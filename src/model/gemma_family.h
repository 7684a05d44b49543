// The ArchSpec hooks (model/arch_spec.h) of Gemma 2 (Gemma2ForCausalLM, GGUF `gemma2`) and the
// Gemma 3 text decoder (Gemma3ForCausalLM, GGUF `gemma3`). Against the Llama family they add:
// GeGLU with the tanh GELU, RMSNorm weights applied as (1 + w), norms after attention and after
// the FFN as well as before, embeddings scaled by sqrt(hidden), attention scaled by
// query_pre_attn_scalar^-1/2, and local (sliding-window) layers interleaved with global ones.
// Gemma 2 soft-caps attention scores and final logits; Gemma 3 RMS-normalises q and k per head
// and gives its local layers their own RoPE base. The graph is model/gemma_graph.h.
#pragma once

#include <cstdint>
#include <string>

#include "model/arch_spec.h"

namespace pagellm {

extern const ArchTensorNames kGemmaHfTensors;
extern const ArchTensorNames kGemmaGgufTensors;

Status ParseGemma2HfFields(const JsonFields& fields, const std::string& source,
                           ModelConfig* config);
Status ParseGemma3HfFields(const JsonFields& fields, const std::string& source,
                           ModelConfig* config);
Status ParseGemma2GgufFields(const GgufFile& gguf, const std::string& prefix, ModelConfig* config);
Status ParseGemma3GgufFields(const GgufFile& gguf, const std::string& prefix, ModelConfig* config);

Status BindGemmaWeights(const ArchTensorNames& names, TensorBinder& binder, ModelConfig* config,
                        ModelWeights* weights);
int64_t CountGemmaParameters(const ModelConfig& config, const ShardDims& dims);

}  // namespace pagellm
