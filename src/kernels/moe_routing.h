// Mixture-of-experts routing: which experts a token uses and with what weight.
//
//   p = softmax(logits[t])  over the n_experts router logits (float32, max subtracted, the
//                           exponentials summed in expert order)
//   the k largest p, largest first; equal p go to the lower expert id
//   weights = those p, divided by their sum when `normalize` (Mixtral, Qwen3-MoE) or as they
//             are (Qwen2-MoE's default)
//
// Every token is routed on its own and in a fixed order, so its experts and weights are the
// same bits whatever other tokens share the batch.
#pragma once

#include <cstdint>

namespace pagellm {

// logits [rows][n_experts] -> ids [rows][k] (expert ids), weights [rows][k]. 1 <= k <= n_experts.
// NaN logits rank below every number.
void RouteTopK(const float* logits, int64_t rows, int n_experts, int k, bool normalize,
               int32_t* ids, float* weights);

}  // namespace pagellm
