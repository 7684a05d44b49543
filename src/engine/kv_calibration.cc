#include "engine/kv_calibration.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/backend_factory.h"
#include "kernels/kv_quant.h"
#include "spdlog/spdlog.h"

namespace pagellm {

std::string_view KvCalibrationText() {
  return "Once upon a time, in a small town by the sea, there lived an old fisherman named Tom. "
         "Every morning he walked down to the harbour with his dog, a brown puppy called Max, "
         "and they sailed out before the sun was up. One day the wind grew strong and the waves "
         "were very big. Tom was scared, but Max barked and wagged his tail, and Tom laughed. "
         "\"We will be fine,\" he said. They caught three silver fish and came home safely. "
         "That night his granddaughter Lily asked him for a story, so he told her about the "
         "storm, the brave little dog and the lighthouse that showed them the way back home.";
}

StatusOr<KvCalibration> ComputeKvCalibration(const LoadedModel& model, const Tokenizer& tokenizer,
                                             int max_model_len, bool calculate_kv_scales,
                                             const KvCacheShape& shape, ThreadPool* pool) {
  const KvCacheShape* kv = &shape;  // its per-layer dtypes
  // The whole model's KV heads, whatever part of them `kv` holds.
  KvCalibration cal;
  cal.num_kv_heads = model.config.num_kv_heads;
  cal.head_dim = shape.head_dim;
  cal.k_offset.resize(shape.num_layers);
  cal.k_smooth.resize(shape.num_layers);
  cal.k_scale.assign(shape.num_layers, 0.0f);
  cal.v_scale.assign(shape.num_layers, 0.0f);
  const std::vector<LayerWeights>& lw = model.weights.layers;
  auto ckpt_k = [&](int l) { return l < static_cast<int>(lw.size()) ? lw[l].kv_k_scale : 0.0f; };
  auto ckpt_v = [&](int l) { return l < static_cast<int>(lw.size()) ? lw[l].kv_v_scale : 0.0f; };
  // Per layer: K smoothing (every quantised layer, except fp8_e4m3 layers whose k_scale comes
  // from the checkpoint: that scale is defined on raw K, and K - c has a different range, so
  // those layers store raw K / k_scale exactly as the checkpoint's producer intended) and the
  // source of the fp8_e4m3 scales (checkpoint > --calculate-kv-scales > 1.0).
  std::vector<uint8_t> smooth_layer(shape.num_layers, 0), calc_layer(shape.num_layers, 0);
  int e4m3_layers = 0, ckpt_layers = 0, default_layers = 0, unused_ckpt_layers = 0;
  bool need_prefill = false;
  for (int l = 0; l < shape.num_layers; ++l) {
    const KvCacheDtype dtype = kv->layer_dtype(l);
    const bool e4m3 = dtype == KvCacheDtype::kFp8E4m3;
    const bool has_ckpt = ckpt_k(l) > 0 || ckpt_v(l) > 0;
    smooth_layer[l] = KvDtypeIsQuantized(dtype) && !(e4m3 && ckpt_k(l) > 0);
    calc_layer[l] = e4m3 && calculate_kv_scales && !(ckpt_k(l) > 0 && ckpt_v(l) > 0);
    need_prefill |= smooth_layer[l] || calc_layer[l];
    if (e4m3) {
      ++e4m3_layers;
      if (has_ckpt) ++ckpt_layers;
      if (!calculate_kv_scales && !(ckpt_k(l) > 0 && ckpt_v(l) > 0)) ++default_layers;
    } else if (has_ckpt) {
      ++unused_ckpt_layers;
    }
  }
  if (ckpt_layers > 0) {
    spdlog::info(
        "KV cache fp8_e4m3 scales: k_scale/v_scale from the checkpoint for {} of {} layers{}{}",
        ckpt_layers, e4m3_layers,
        calculate_kv_scales ? " (they take precedence over --calculate-kv-scales)" : "",
        " (no K smoothing where k_scale is given: it is defined on raw K)");
  } else if (e4m3_layers > 0 && calculate_kv_scales) {
    spdlog::info(
        "KV cache fp8_e4m3 scales: computed by --calculate-kv-scales from the built-in "
        "calibration text");
  }
  if (default_layers > 0) {
    // As vLLM: without checkpoint scales and without --calculate-kv-scales, fp8 values are
    // stored unscaled, which clips |x| > 448.
    spdlog::warn(
        "--kv-cache-dtype fp8_e4m3: {} of {} layers lack a k_scale or v_scale in the checkpoint "
        "and --calculate-kv-scales is off, so their K/V scales default to 1.0, which may cause "
        "accuracy issues",
        default_layers, e4m3_layers);
  }
  if (unused_ckpt_layers > 0) {
    // debug: the float reference cache of `pagellm eval kl` would say it on every run.
    spdlog::debug(
        "the checkpoint's KV cache scales ({} layers) are unused: they apply to "
        "fp8_e4m3 only",
        unused_ckpt_layers);
  }
  // Checkpoint scales need no prefill.
  for (int l = 0; l < shape.num_layers; ++l) {
    if (kv->layer_dtype(l) != KvCacheDtype::kFp8E4m3 || calc_layer[l]) continue;
    cal.k_scale[l] = ckpt_k(l) > 0 ? ckpt_k(l) : 1.0f;
    cal.v_scale[l] = ckpt_v(l) > 0 ? ckpt_v(l) : 1.0f;
  }
  if (!need_prefill) return cal;

  // Tokens: BOS first (whatever the tokenizer's add_bos says), at most 256, within the
  // context limit.
  std::vector<int32_t> ids;
  if (tokenizer.bos_id() >= 0) ids.push_back(tokenizer.bos_id());
  for (int32_t id : tokenizer.Encode(KvCalibrationText(), /*add_special=*/false,
                                     /*parse_special=*/false))
    ids.push_back(id);
  const int n = static_cast<int>(
      std::min<size_t>(ids.size(), static_cast<size_t>(std::clamp(max_model_len, 1, 256))));
  ids.resize(n);
  if (n < 2) return cal;  // nothing meaningful to average

  // Prefill through a temporary float32 cache (blocks 1.. hold positions 0..n-1).
  KvCacheShape fshape;
  fshape.num_layers = shape.num_layers;
  fshape.num_kv_heads = cal.num_kv_heads;
  fshape.head_dim = shape.head_dim;
  fshape.block_size = 16;
  fshape.num_blocks = (n + fshape.block_size - 1) / fshape.block_size + 1;
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateBackend(model, BackendOptions(pool, n)));
  RETURN_IF_ERROR(backend->AllocateKvCache(fshape, /*num_swap_blocks=*/0));
  KvCacheStorage& fkv = backend->kv_cache();
  std::vector<int32_t> table(fshape.num_blocks - 1);
  for (size_t b = 0; b < table.size(); ++b) table[b] = static_cast<int32_t>(b + 1);
  {
    ForwardBatch batch;
    batch.token_ids = ids;
    SequenceChunk chunk;
    chunk.num_tokens = n;
    chunk.start_pos = 0;
    chunk.block_table = table;
    batch.seqs.push_back(chunk);
    ForwardOutput out;
    RETURN_IF_ERROR(backend->Forward(batch, &out));
  }

  const int d = shape.head_dim, heads = cal.num_kv_heads;
  const int64_t kvd = int64_t{heads} * d;
  std::vector<double> sum(kvd);
  std::vector<float> c(kvd), s(kvd);
  for (int l = 0; l < shape.num_layers; ++l) {
    const KvCacheDtype dtype = kv->layer_dtype(l);
    // Element i of the [heads][d] K / V of position p.
    auto k_at = [&](int p, int64_t i) {
      return fkv.k_row(l, table[p / 16], p % 16, static_cast<int>(i / d))[i % d];
    };
    auto v_at = [&](int p, int64_t i) {
      return fkv.v_row(l, table[p / 16], p % 16, static_cast<int>(i / d))[i % d];
    };
    const bool smooth = smooth_layer[l] != 0;
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(c.begin(), c.end(), 0.0f);
    std::fill(s.begin(), s.end(), 1.0f);
    if (smooth) {
      for (int p = 0; p < n; ++p)
        for (int64_t i = 0; i < kvd; ++i) sum[i] += k_at(p, i);
      for (int64_t i = 0; i < kvd; ++i) c[i] = static_cast<float>(sum[i] / n);
    }
    if (smooth && KvDtypeUsesKRangeSmoothing(dtype)) {
      std::fill(s.begin(), s.end(), 0.0f);
      for (int p = 0; p < n; ++p)
        for (int64_t i = 0; i < kvd; ++i) s[i] = std::max(s[i], std::fabs(k_at(p, i) - c[i]));
      // Floor each head's ranges so that near-constant channels never divide by ~0.
      for (int h = 0; h < heads; ++h) {
        float* sh = s.data() + int64_t{h} * d;
        const float top = *std::max_element(sh, sh + d);
        const float floor = top > 0 ? 1e-3f * top : 1.0f;
        for (int x = 0; x < d; ++x) sh[x] = std::max(sh[x], floor);
      }
    }
    if (smooth) {
      cal.k_offset[l] = c;
      cal.k_smooth[l] = s;
    }
    if (calc_layer[l]) {
      // Over what the layer stores: K - c (c = 0 when a checkpoint k_scale disabled smoothing,
      // but then k_scale is the checkpoint's anyway) and raw V.
      float km = 0.0f, vm = 0.0f;
      for (int p = 0; p < n; ++p)
        for (int64_t i = 0; i < kvd; ++i) {
          km = std::max(km, std::fabs(k_at(p, i) - c[i]));
          vm = std::max(vm, std::fabs(v_at(p, i)));
        }
      cal.k_scale[l] = ckpt_k(l) > 0 ? ckpt_k(l) : km > 0 ? km / kFp8E4m3Max : 1.0f;
      cal.v_scale[l] = ckpt_v(l) > 0 ? ckpt_v(l) : vm > 0 ? vm / kFp8E4m3Max : 1.0f;
    }
  }
  spdlog::debug("KV cache calibrated on {} tokens of the built-in text{}", n,
                calculate_kv_scales ? " (with fp8 scales)" : "");
  return cal;
}

Status CalibrateKvCache(const LoadedModel& model, const Tokenizer& tokenizer, int max_model_len,
                        bool calculate_kv_scales, KvCacheStorage* kv, ThreadPool* pool) {
  ASSIGN_OR_RETURN(KvCalibration cal, ComputeKvCalibration(model, tokenizer, max_model_len,
                                                           calculate_kv_scales, kv->shape(), pool));
  return ApplyKvCalibration(cal, 0, kv);
}

Status CalibrateKvCache(const LoadedModel& model, const Tokenizer& tokenizer, int max_model_len,
                        bool calculate_kv_scales, Backend* backend, ThreadPool* pool) {
  ASSIGN_OR_RETURN(KvCalibration cal,
                   ComputeKvCalibration(model, tokenizer, max_model_len, calculate_kv_scales,
                                        backend->model_kv_shape(), pool));
  return backend->SetKvCalibration(cal);
}

}  // namespace pagellm
