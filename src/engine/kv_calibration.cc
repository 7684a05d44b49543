#include "engine/kv_calibration.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu_backend.h"
#include "kv/kv_quant.h"
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

Status CalibrateKvCache(const LoadedModel& model, const Tokenizer& tokenizer, int max_model_len,
                        bool calculate_kv_scales, KvCacheStorage* kv, ThreadPool* pool) {
  const KvCacheShape& shape = kv->shape();
  bool any_quantized = false, any_e4m3 = false;
  for (int l = 0; l < shape.num_layers; ++l) {
    any_quantized |= KvDtypeIsQuantized(kv->layer_dtype(l));
    any_e4m3 |= kv->layer_dtype(l) == KvCacheDtype::kFp8E4m3;
  }
  if (any_e4m3 && !calculate_kv_scales) {
    // As vLLM: without --calculate-kv-scales (and without checkpoint scales) fp8 values are
    // stored unscaled, which clips |x| > 448.
    spdlog::warn(
        "--kv-cache-dtype fp8_e4m3 without --calculate-kv-scales: the K/V scales default to "
        "1.0, which may cause accuracy issues; pass --calculate-kv-scales to compute them");
  }
  if (!any_quantized && !(calculate_kv_scales && any_e4m3)) return Status::Ok();

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
  if (n < 2) return Status::Ok();  // nothing meaningful to average

  // Prefill through a temporary float32 cache (blocks 1.. hold positions 0..n-1).
  KvCacheShape fshape;
  fshape.num_layers = shape.num_layers;
  fshape.num_kv_heads = shape.num_kv_heads;
  fshape.head_dim = shape.head_dim;
  fshape.block_size = 16;
  fshape.num_blocks = (n + fshape.block_size - 1) / fshape.block_size + 1;
  ASSIGN_OR_RETURN(KvCacheStorage fkv, KvCacheStorage::Create(fshape));
  std::vector<int32_t> table(fshape.num_blocks - 1);
  for (size_t b = 0; b < table.size(); ++b) table[b] = static_cast<int32_t>(b + 1);
  {
    CpuBackend backend(model, &fkv, pool, n);
    ForwardBatch batch;
    batch.token_ids = ids;
    SequenceChunk chunk;
    chunk.num_tokens = n;
    chunk.start_pos = 0;
    chunk.block_table = table;
    batch.seqs.push_back(chunk);
    ForwardOutput out;
    RETURN_IF_ERROR(backend.Forward(batch, &out));
  }

  const int d = shape.head_dim, heads = shape.num_kv_heads;
  const int64_t kvd = int64_t{heads} * d;
  std::vector<double> sum(kvd);
  std::vector<float> c(kvd), s(kvd);
  for (int l = 0; l < shape.num_layers; ++l) {
    const KvCacheDtype dtype = kv->layer_dtype(l);
    auto k_row = [&](int p) { return fkv.k_slot(l, table[p / 16], p % 16); };
    auto v_row = [&](int p) { return fkv.v_slot(l, table[p / 16], p % 16); };
    const bool smooth = KvDtypeIsQuantized(dtype);
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(c.begin(), c.end(), 0.0f);
    std::fill(s.begin(), s.end(), 1.0f);
    if (smooth) {
      for (int p = 0; p < n; ++p)
        for (int64_t i = 0; i < kvd; ++i) sum[i] += k_row(p)[i];
      for (int64_t i = 0; i < kvd; ++i) c[i] = static_cast<float>(sum[i] / n);
    }
    if (smooth && KvDtypeUsesKRangeSmoothing(dtype)) {
      std::fill(s.begin(), s.end(), 0.0f);
      for (int p = 0; p < n; ++p)
        for (int64_t i = 0; i < kvd; ++i) s[i] = std::max(s[i], std::fabs(k_row(p)[i] - c[i]));
      // Floor each head's ranges so that near-constant channels never divide by ~0.
      for (int h = 0; h < heads; ++h) {
        float* sh = s.data() + int64_t{h} * d;
        const float top = *std::max_element(sh, sh + d);
        const float floor = top > 0 ? 1e-3f * top : 1.0f;
        for (int x = 0; x < d; ++x) sh[x] = std::max(sh[x], floor);
      }
    }
    if (smooth) kv->set_k_smoothing(l, c.data(), s.data());
    if (calculate_kv_scales && dtype == KvCacheDtype::kFp8E4m3) {
      float km = 0.0f, vm = 0.0f;
      for (int p = 0; p < n; ++p)
        for (int64_t i = 0; i < kvd; ++i) {
          km = std::max(km, std::fabs(k_row(p)[i] - c[i]));
          vm = std::max(vm, std::fabs(v_row(p)[i]));
        }
      kv->set_scales(l, km > 0 ? km / kFp8E4m3Max : 1.0f, vm > 0 ? vm / kFp8E4m3Max : 1.0f);
    }
  }
  spdlog::debug("KV cache calibrated on {} tokens of the built-in text{}", n,
                calculate_kv_scales ? " (with fp8 scales)" : "");
  return Status::Ok();
}

}  // namespace pagellm
