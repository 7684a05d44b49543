// The forward graph of a Llama-family decoder (Llama, Mistral, Qwen2, Qwen3), written once against
// ForwardOps (model/forward_ops.h). Per layer, for the T tokens of a step (all sequences back to
// back):
//   h = RMSNorm(x) · attn_norm;  q,k,v = h·Wq/Wk/Wv (+bias);  [per-head RMSNorm(q, k) · q/k_norm]
//   RoPE(q, k) at each token's position
//   K/V written to the token's cache slot;  a = PagedAttention(q, cache);  x += a·Wo
//   h = RMSNorm(x) · ffn_norm;  x += (silu(h·Wgate) ⊙ (h·Wup))·Wdown, or in a sparse layer
//   x += MoeFfn(h) (the selected experts' SwiGLU outputs, weighted by the router)
// then logits = RMSNorm(x)·final_norm · lm_head for the rows that need them (the last token of
// each chunk, or all of them with all_logits). Under tensor parallelism (model/
// tensor_parallel_shard.h) `model` is one rank's shard: the two residual adds of a layer sum
// the ranks' partial projections (ForwardOps::AddAllReduced; in a sparse layer the partial
// MoeFfn output of each rank's share of every expert), and the ops embed and produce logits
// over the whole vocabulary. Under pipeline parallelism (model/pipeline_stage.h) `model` holds
// one stage's layers: it starts from the previous stage's residual stream and hands its own to
// the next (BeginDecoderStage / EndDecoderStage).
#pragma once

#include <cstdint>

#include "base/forward_batch.h"
#include "model/forward_ops.h"
#include "model/model_weights.h"

namespace pagellm {

// Runs `batch` (already validated against the model and the cache by the backend) through the
// decoder on `ops`.
void ForwardDecoder(const LoadedModel& model, const ForwardBatch& batch, ForwardOps& ops,
                    ForwardOutput* out);

// Floats of activation scratch ForwardDecoder asks for in a step of `num_tokens` tokens and
// `num_logit_rows` logits rows (logits included).
// The outputs every decoder graph ends with, from the residual stream x [T][hidden]: logits
// of the rows that need them (final RMSNorm, lm_head, then cap · tanh(logit / cap) with
// ModelConfig::final_logit_softcap) through scratch slot `logit_in_slot`, and the final-normed
// hidden states of the sequences that asked for them.
void EmitDecoderOutputs(const LoadedModel& model, const ForwardBatch& batch, ForwardOps& ops,
                        const float* x, int logit_in_slot, ForwardOutput* out);

// The residual stream x [T][hidden] before the first layer `model` holds: the token
// embeddings, or in a pipeline stage after the first (ModelWeights::layer_begin > 0) what the
// previous stage sent (ForwardOps::ReceiveStageInput).
void BeginDecoderStage(const LoadedModel& model, const ForwardBatch& batch, ForwardOps& ops,
                       float* x);
// After the last layer `model` holds: EmitDecoderOutputs when that is the model's last layer,
// else x sent on to the next pipeline stage (ForwardOps::SendStageOutput; `out` is untouched).
void EndDecoderStage(const LoadedModel& model, const ForwardBatch& batch, ForwardOps& ops,
                     const float* x, int logit_in_slot, ForwardOutput* out);

int64_t DecoderActivationFloats(const ModelConfig& config, int64_t num_tokens,
                                int64_t num_logit_rows);

}  // namespace pagellm
