// fp8_e4m3 KV scales from a checkpoint (vLLM's model.layers.N.self_attn.k_scale / v_scale):
// the start-up calibration puts them into the cache storage (precedence over
// --calculate-kv-scales), stores those layers unsmoothed (the scales are defined on raw K), and
// they change what the cache holds (perplexity moves when they do). The checkpoint is
// ../shared/models/stories260K rewritten with scalar scale tensors added.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/kv_calibration.h"
#include "eval/evaluator.h"
#include "kv/kv_cache_storage.h"
#include "model/model_weights.h"
#include "model/safetensors_file.h"
#include "model/test_file_writers.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {
namespace {

namespace fs = std::filesystem;
const std::string kModel = std::string(PAGELLM_SHARED_DIR) + "/models/stories260K";
const std::string kText = std::string(PAGELLM_SHARED_DIR) + "/data/tinystories_sample.txt";

std::string F32Bytes(float v) {
  std::string b(4, '\0');
  std::memcpy(b.data(), &v, 4);
  return b;
}

// Copies stories260K into `dir` with k_scale(layer) / v_scale(layer) added as scalar F32
// tensors (v_scale given per layer; k_scale <= 0 leaves that layer's k_scale out).
void WriteScaledCopy(const testing::TempDir& dir, const std::vector<float>& k_scale,
                     const std::vector<float>& v_scale) {
  for (const char* f :
       {"config.json", "generation_config.json", "tokenizer.model", "tokenizer_config.json"})
    fs::copy_file(kModel + "/" + f, dir.path() + "/" + f);
  auto src = SafetensorsFile::Open(kModel + "/model.safetensors");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  testing::SafetensorsBuilder b;
  for (const TensorView& t : (*src)->tensors())
    b.Add(t.name, std::string(DTypeName(t.dtype)), t.shape,
          std::string(reinterpret_cast<const char*>(t.data), t.nbytes));
  for (size_t l = 0; l < v_scale.size(); ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    if (k_scale[l] > 0) b.Add(p + "k_scale", "F32", {}, F32Bytes(k_scale[l]));
    b.Add(p + "v_scale", "F32", {}, F32Bytes(v_scale[l]));
  }
  dir.Write("model.safetensors", b.Build());
}

class KvCheckpointScalesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kModel + "/model.safetensors") || !fs::exists(kText))
      GTEST_SKIP() << "shared assets absent: " << kModel;
  }

  // A fresh fp8_e4m3 (or `dtype`) cache for `model`, calibrated.
  static KvCacheStorage Calibrated(const LoadedModel& model, bool calculate,
                                   KvCacheDtype dtype = KvCacheDtype::kFp8E4m3) {
    auto tok = LoadTokenizerFromDir(model.path);
    EXPECT_TRUE(tok.ok()) << tok.status().ToString();
    KvCacheShape shape;
    shape.num_layers = model.config.num_layers;
    shape.num_kv_heads = model.config.num_kv_heads;
    shape.head_dim = model.config.head_dim;
    shape.num_blocks = 4;
    shape.dtype = dtype;
    auto kv = KvCacheStorage::Create(shape);
    EXPECT_TRUE(kv.ok()) << kv.status().ToString();
    const Status st = CalibrateKvCache(model, **tok, 512, calculate, &*kv, nullptr);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return std::move(*kv);
  }
};

TEST_F(KvCheckpointScalesTest, CheckpointScalesReachTheCacheAndWinOverCalculated) {
  auto plain = LoadModel(kModel);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  const int layers = (*plain)->config.num_layers;
  ASSERT_GE(layers, 2);
  // Layer 0 carries only v_scale: its K keeps the smoothing and the calculated / default scale.
  std::vector<float> k(layers), v(layers);
  for (int l = 0; l < layers; ++l) {
    k[l] = l == 0 ? 0.0f : 0.0625f * static_cast<float>(l);
    v[l] = 0.03125f * static_cast<float>(l + 1);
  }
  testing::TempDir dir;
  WriteScaledCopy(dir, k, v);
  auto m = LoadModel(dir.path());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (int l = 0; l < layers; ++l) {
    EXPECT_EQ((*m)->weights.layers[l].kv_k_scale, k[l]);
    EXPECT_EQ((*m)->weights.layers[l].kv_v_scale, v[l]);
  }
  const KvCacheStorage reference = Calibrated(**plain, /*calculate=*/true);
  for (bool calculate : {false, true}) {
    SCOPED_TRACE(calculate ? "--calculate-kv-scales" : "no --calculate-kv-scales");
    const KvCacheStorage kv = Calibrated(**m, calculate);
    for (int l = 0; l < layers; ++l) {
      EXPECT_EQ(kv.v_scale(l), v[l]) << "layer " << l;
      if (l == 0) {
        EXPECT_EQ(kv.k_scale(0), calculate ? reference.k_scale(0) : 1.0f);
        EXPECT_TRUE(kv.k_smoothed(0));
      } else {
        EXPECT_EQ(kv.k_scale(l), k[l]) << "layer " << l;
        EXPECT_FALSE(kv.k_smoothed(l)) << "a checkpoint k_scale is defined on raw K";
      }
    }
  }
  // The calculated scales are not the checkpoint's (so the checks above are not vacuous).
  EXPECT_NE(reference.k_scale(1), k[1]);
  EXPECT_NE(reference.v_scale(1), v[1]);
  // Formats without per-layer scales ignore them and keep their smoothing.
  const KvCacheStorage int8 = Calibrated(**m, false, KvCacheDtype::kInt8);
  for (int l = 0; l < layers; ++l) {
    EXPECT_EQ(int8.k_scale(l), 1.0f);
    EXPECT_TRUE(int8.k_smoothed(l));
  }
}

TEST_F(KvCheckpointScalesTest, ScalesChangeWhatTheCacheStores) {
  // The same checkpoint with two sets of scales: 1.0, and 1/256 (|x| > 1.75 saturates).
  // The fp8 cache must give different logits (and finite perplexities); the float32 reference
  // must not change.
  auto plain = LoadModel(kModel);
  ASSERT_TRUE(plain.ok());
  const int layers = (*plain)->config.num_layers;
  std::ifstream in(kText);
  std::stringstream ss;
  ss << in.rdbuf();
  double ppl[2], ref[2];
  for (int i = 0; i < 2; ++i) {
    const float s = i == 0 ? 1.0f : 1.0f / 256;
    testing::TempDir dir;
    WriteScaledCopy(dir, std::vector<float>(layers, s), std::vector<float>(layers, s));
    EngineConfig c;
    c.model = dir.path();
    c.kv_cache_dtype = KvCacheDtype::kFp8E4m3;
    auto e = Evaluator::Create(c);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    const auto docs = (*e)->TokenizeText(ss.str(), 5);
    auto r = (*e)->CompareWithModelDtype(docs, EvalOptions{});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ppl[i] = r->candidate.perplexity();
    ref[i] = r->reference.perplexity();
    ASSERT_TRUE(std::isfinite(ppl[i]));
    std::printf("fp8 checkpoint scale %g: ppl %.4f (float32 cache %.4f)\n", s, ppl[i], ref[i]);
  }
  EXPECT_EQ(ref[0], ref[1]);
  EXPECT_NE(ppl[0], ppl[1]);
  EXPECT_GT(ppl[1], ppl[0]) << "saturating at 1.75 should cost accuracy";
}

}  // namespace
}  // namespace pagellm
