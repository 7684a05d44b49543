// Start-up calibration of a quantised KV cache: K smoothing and --calculate-kv-scales.
//
// A fixed built-in English text is prefilled through the model with a temporary float32 cache;
// from its post-RoPE K and V rows, per layer and KV head:
//   c[d] = mean over positions of K[d]                 (every quantised format)
//   s[d] = max over positions of |K[d] - c[d]|         (int8 / int4; floored at 1e-3 x max_d s)
// and the target cache stores K' = (K - c) / s (kv/kv_cache_storage.h), an exact
// re-parameterisation of attention that removes K's per-channel offsets and outliers before
// quantisation. With calculate_kv_scales, fp8_e4m3 layers also get k_scale = max|K - c| / 448
// and v_scale = max|V| / 448 over the same text (vLLM computes them from the first batch; a
// fixed text keeps the engine batch invariant and deterministic). Never calibrated from live
// requests, so outputs do not depend on the workload.
//
// Checkpoint fp8 scales (LayerWeights::kv_k_scale / kv_v_scale, read by the model loader from
// vLLM's self_attn.k_scale / v_scale names) take precedence over --calculate-kv-scales, which
// takes precedence over 1.0 (with a warning); the start-up log says which applies. A checkpoint
// k_scale is defined on raw K (the quantiser that wrote it saw no smoothing), so an fp8_e4m3
// layer with a checkpoint k_scale is stored unsmoothed (K / k_scale, as vLLM stores it) rather
// than converting the scale: max|K - c| over our calibration text says nothing about the range
// the checkpoint's producer calibrated over.
#pragma once

#include <string_view>

#include "backend/backend.h"
#include "base/thread_pool.h"
#include "kv/kv_cache_storage.h"
#include "model/model_weights.h"
#include "pagellm/status.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

// The calibration text (plain narrative English, a few hundred characters).
std::string_view KvCalibrationText();

// The calibration of a cache whose layers are stored as `shape` says (the whole model's: every
// layer), over all of `model`'s KV heads (whatever heads and layers a rank's pool holds: each
// rank of a split model applies its part of the same numbers); no layer set when none is stored
// in a quantised format and calculate_kv_scales is off. At most min(256, max_model_len) tokens
// of the text, BOS first, prefilled through the whole model on this process. `pool` may be
// null.
StatusOr<KvCalibration> ComputeKvCalibration(const LoadedModel& model, const Tokenizer& tokenizer,
                                             int max_model_len, bool calculate_kv_scales,
                                             const KvCacheShape& shape, ThreadPool* pool);

// Calibrates `kv` (already created for the whole `model`) in place.
Status CalibrateKvCache(const LoadedModel& model, const Tokenizer& tokenizer, int max_model_len,
                        bool calculate_kv_scales, KvCacheStorage* kv, ThreadPool* pool);

// Calibrates the primary pool of `backend` (Backend::SetKvCalibration: under tensor and
// pipeline parallelism every rank's heads and layers).
Status CalibrateKvCache(const LoadedModel& model, const Tokenizer& tokenizer, int max_model_len,
                        bool calculate_kv_scales, Backend* backend, ThreadPool* pool);

}  // namespace pagellm
