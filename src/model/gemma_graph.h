// The forward graph of Gemma 2 and Gemma 3 (model/gemma_family.h), against ForwardOps
// (model/forward_ops.h). For the T tokens of a step:
//   x = embed[ids] · embedding_scale
//   per layer l:
//     h = RMSNorm(x) · attn_norm;  q,k,v = h·Wq/Wk/Wv;  [Gemma 3: per-head RMSNorm(q, k)]
//     RoPE(q, k) with layer l's table (Gemma 3: local layers their own base)
//     a = PagedAttention(q, cache) with layer l's window, scale and soft-cap
//     x += RMSNorm(a·Wo) · post_attn_norm
//     h = RMSNorm(x) · ffn_norm;  x += RMSNorm((gelu_tanh(h·Wgate) ⊙ (h·Wup))·Wdown) ·
//     post_ffn_norm
//   logits = softcap(RMSNorm(x)·final_norm · lm_head)   (EmitDecoderOutputs)
// Every norm weight is the (1 + w) Gemma applies, folded at load.
#pragma once

#include <cstdint>

#include "base/forward_batch.h"
#include "model/forward_ops.h"
#include "model/model_weights.h"

namespace pagellm {

void ForwardGemma(const LoadedModel& model, const ForwardBatch& batch, ForwardOps& ops,
                  ForwardOutput* out);

// Floats of activation scratch ForwardGemma asks for (logits included).
int64_t GemmaActivationFloats(const ModelConfig& config, int64_t num_tokens,
                              int64_t num_logit_rows);

}  // namespace pagellm
