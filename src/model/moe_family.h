// The ArchSpec hooks (model/arch_spec.h) that the mixture-of-experts decoders add to the
// Llama-family ones (model/llama_family.h): Mixtral (a Mistral decoder with 8 experts, top 2),
// Qwen2-MoE (Qwen2 attention, experts plus a gated shared expert) and Qwen3-MoE (Qwen3
// attention, 128 experts, top 8). Their attention, norms and graph are the Llama family's; the
// sparse layers' FFN is ModelConfig::moe.
#pragma once

#include <cstdint>
#include <string>

#include "model/arch_spec.h"

namespace pagellm {

extern const ArchTensorNames kMixtralHfTensors;
extern const ArchTensorNames kQwenMoeHfTensors;
// GGUF (llama.cpp's names): ffn_gate_inp router, stacked ffn_{gate,up,down}_exps, *_shexp.
extern const ArchTensorNames kMoeGgufTensors;

Status ParseMixtralHfFields(const JsonFields& fields, const std::string& source,
                            ModelConfig* config);
Status ParseQwen2MoeHfFields(const JsonFields& fields, const std::string& source,
                             ModelConfig* config);
Status ParseQwen3MoeHfFields(const JsonFields& fields, const std::string& source,
                             ModelConfig* config);

// Binds layer `layer`'s experts (prefix: "model.layers.N." / "blk.N.").
Status BindMoeLayer(const MoeTensorNames& names, const std::string& prefix, TensorBinder& binder,
                    const ModelConfig& config, MoeWeights* weights);

// Parameters of one sparse layer's FFN: all experts (`active` false) or the router, the
// num_experts_per_tok experts a token reads and the shared expert (`active` true), with each
// expert `expert_inter` and the shared expert `shared_inter` wide (a tensor-parallel rank's
// shares, or the config's widths).
int64_t MoeLayerParameters(const ModelConfig& config, int64_t hidden, int64_t expert_inter,
                           int64_t shared_inter, bool active);

// Parameters a token uses: the whole model less, in each sparse layer, the experts it does not
// select (num_experts - num_experts_per_tok of them). The parameter count for a dense model.
int64_t CountActiveParameters(const ModelConfig& config);

// Weight bytes a decode step of one token reads: the weights' bytes less, in each sparse
// layer, the bytes of the experts it does not select (experts of a layer share dtype and shape).
// weights.total_bytes for a dense model.
int64_t ActiveWeightBytes(const ModelConfig& config, const ModelWeights& weights);

}  // namespace pagellm
