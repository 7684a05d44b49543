// The GGUF files of /work/shared/models/kquant-ref (llama.cpp's own quantizer: Q2_K..Q6_K
// presets, IQ4_NL, IQ4_XS, Q4_1, Q5_0, Q5_1, each with llama.cpp's per-tensor type mix) against
// its expected.json, made with llama.cpp's gguf-py:
//   - every tensor's type and shape, and its dequantization by the engine's reference
//     dequantizers: the first 16 values of the first and last rows and the sha256 of all values
//     as little-endian float32, exactly (tests/test_kquant_ref.py checks the independent numpy
//     dequantizer against the same sha256s, so the two are equal bit for bit);
//   - greedy generation equals the float64 forward over the dequantized weights.
#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/model_session.h"
#include "engine/sequential_generator.h"
#include "kernels/quantize.h"
#include "kernels/weight_format.h"
#include "model/gguf_file.h"
#include "model/gguf_quantizer.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

namespace fs = std::filesystem;
const std::string kDir = std::string(PAGELLM_SHARED_DIR) + "/models/kquant-ref";

const nlohmann::json& Expected() {
  static const nlohmann::json j = [] {
    std::ifstream in(kDir + "/expected.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}

std::string Hex(const unsigned char* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

class KquantRefTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!fs::exists(kDir + "/expected.json")) GTEST_SKIP() << "shared assets absent: " << kDir;
  }
};

TEST_P(KquantRefTest, DequantizedTensorsEqualLlamaCpp) {
  const std::string file = GetParam();
  auto gguf = GgufFile::Open(kDir + "/" + file);
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  const nlohmann::json& tensors = Expected()["files"][file]["tensors"];
  ASSERT_FALSE(tensors.empty());
  for (const auto& [name, e] : tensors.items()) {
    const TensorView* t = (*gguf)->FindTensor(name);
    ASSERT_NE(t, nullptr) << file << ": " << name;
    EXPECT_EQ(DTypeName(t->dtype), e["type"].get<std::string>()) << file << ": " << name;
    const auto shape = e["shape"].get<std::vector<int64_t>>();
    ASSERT_EQ(t->shape, shape) << file << ": " << name;
    const int64_t cols = shape.back();
    const int64_t rows = t->numel() / cols;
    std::vector<float> v(static_cast<size_t>(t->numel()));
    const int64_t row_bytes = DTypeRowBytes(t->dtype, cols);
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(t->dtype, t->data + r * row_bytes, v.data() + r * cols, cols);
    }
    const auto first = e["row0_first16"].get<std::vector<float>>();
    const auto last = e["last_row_first16"].get<std::vector<float>>();
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ(v[i], first[i]) << file << ": " << name << " row 0 [" << i << "]";
      EXPECT_EQ(v[(rows - 1) * cols + i], last[i]) << file << ": " << name << " last row";
    }
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(v.data()), v.size() * sizeof(float), digest);
    EXPECT_EQ(Hex(digest, sizeof(digest)), e["sha256_f32"].get<std::string>())
        << file << ": " << name << " (" << DTypeName(t->dtype) << ")";
  }
}

// The engine quantizes activations to 8 bits (as llama.cpp does), so its logits differ from the
// float64 forward by up to kQuantTol x max|logit| (the project's quantized-logits tolerance,
// tests/test_reference_logits.py; 4.1e-2 measured on these files). Greedy ids must be equal
// wherever that cannot flip the argmax: at every step whose top-2 margin (the engine's
// logprobs) exceeds 2 x kQuantTol x max|logit|; after the first closer step the two greedy paths
// may part, and the rest is not compared. (This random-weight model's top-2 margins are mostly
// below that, so few steps qualify; tests/test_kquant_ref.py checks every position
// teacher-forced against a float64 forward that rounds activations as the engine does.) The F16
// file has float activations: every step is compared.
constexpr double kQuantTol = 5e-2;

TEST_P(KquantRefTest, GreedyMatchesFloat64Reference) {
  const std::string file = GetParam();
  SessionOptions opts;
  opts.model_path = kDir + "/" + file;
  auto session = ModelSession::Open(opts);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  SequentialGenerator gen(session->get());
  const bool exact = file == "kquant-ref-F16.gguf";  // float activations: every step
  int compared = 0;
  for (const nlohmann::json& g : Expected()["files"][file]["greedy"]) {
    const auto prompt = g["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = g["greedy_ids"].get<std::vector<int32_t>>();
    if (want.empty()) continue;  // the reference cut it at a first-step near tie
    const double max_logit = std::abs(g["top5_last_prompt"][0][1].get<double>());
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = static_cast<int>(want.size());
    p.ignore_eos = true;
    p.logprobs = 2;
    auto out = gen.Generate(prompt, p);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->token_ids.size(), want.size());
    if (exact) {
      EXPECT_EQ(out->token_ids, want) << file;
      compared += static_cast<int>(want.size());
      continue;
    }
    for (size_t i = 0; i < want.size(); ++i) {
      const auto& top = out->logprobs[i].top;
      ASSERT_GE(top.size(), 2u);
      if (top[0].second - top[1].second <= 2 * kQuantTol * max_logit) break;
      EXPECT_EQ(out->token_ids[i], want[i]) << file << " step " << i;
      ++compared;
    }
  }
  std::printf("%s: %d greedy steps compared\n", file.c_str(), compared);
}

// The engine's quantizers (kernels/quantize_blocks.cc) against llama.cpp's on the same weights:
// every tensor llama.cpp stored in a block type is quantized by the engine from the F16 file's
// values, and the squared error of its reconstruction (over all such tensors of the file) must
// not exceed llama.cpp's by more than 5%. (llama.cpp weighs its K-quant searches by importance
// heuristics even without an imatrix; the engine's minimises the plain squared error, which is
// what this compares.)
TEST_P(KquantRefTest, EngineQuantizerIsAsAccurateAsLlamaCpp) {
  const std::string file = GetParam();
  if (file == "kquant-ref-F16.gguf") GTEST_SKIP() << "the source itself";
  auto source = GgufFile::Open(kDir + "/kquant-ref-F16.gguf");
  auto theirs = GgufFile::Open(kDir + "/" + file);
  ASSERT_TRUE(source.ok() && theirs.ok());
  double err_ours = 0, err_theirs = 0;
  int tensors = 0;
  for (const auto& [name, e] : Expected()["files"][file]["tensors"].items()) {
    const TensorView* t = (*theirs)->FindTensor(name);
    const TensorView* f16 = (*source)->FindTensor(name);
    ASSERT_TRUE(t != nullptr && f16 != nullptr) << name;
    const WeightFormat& fmt = GetWeightFormat(t->dtype);
    if (fmt.matmul != MatMulFamily::kInt8Decode) continue;  // F16/F32/Q8_0 parts of the mix
    const int64_t cols = t->shape.back();
    const int64_t rows = t->numel() / cols;
    std::vector<float> x(static_cast<size_t>(cols)), a(x.size()), b(x.size());
    std::vector<uint8_t> q(static_cast<size_t>(DTypeRowBytes(t->dtype, cols)));
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(f16->dtype, f16->data + r * DTypeRowBytes(f16->dtype, cols), x.data(), cols);
      QuantizeRow(t->dtype, x.data(), q.data(), cols);
      DequantizeRow(t->dtype, q.data(), a.data(), cols);
      DequantizeRow(t->dtype, t->data + r * q.size(), b.data(), cols);
      for (int64_t c = 0; c < cols; ++c) {
        err_ours += (a[c] - x[c]) * double{a[c] - x[c]};
        err_theirs += (b[c] - x[c]) * double{b[c] - x[c]};
      }
    }
    ++tensors;
  }
  ASSERT_GT(tensors, 0);
  std::printf("%s: engine / llama.cpp squared error %.4f (%d tensors)\n", file.c_str(),
              err_ours / err_theirs, tensors);
  EXPECT_LE(err_ours, 1.05 * err_theirs) << file;
}

// `pagellm quantize` (model/gguf_quantizer.h) from the F16 file to the preset of each of
// llama-quantize's files: every tensor gets llama.cpp's type for it (the preset rules of
// model/quant_preset.h: output Q6_K, more bits for attn_v / attn_output / ffn_down in the
// presets and layers that get them), shapes and metadata are kept with general.file_type set as
// llama.cpp sets it, and the file loads and generates.
TEST_P(KquantRefTest, QuantizedFileHasLlamaCppTensorTypes) {
  const std::string file = GetParam();
  if (file == "kquant-ref-F16.gguf") GTEST_SKIP() << "the source itself";
  const std::string preset_name = file.substr(11, file.size() - 16);
  auto preset = FindQuantPreset(preset_name);
  ASSERT_TRUE(preset.ok()) << preset.status().ToString();
  const std::string out = testing::TempDir() + "/" + file;
  ThreadPool pool(2);
  auto result = QuantizeGguf(kDir + "/kquant-ref-F16.gguf", out, *preset, &pool, nullptr);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  auto ours = GgufFile::Open(out);
  auto theirs = GgufFile::Open(kDir + "/" + file);
  auto source = GgufFile::Open(kDir + "/kquant-ref-F16.gguf");
  ASSERT_TRUE(ours.ok() && theirs.ok() && source.ok()) << ours.status().ToString();
  ASSERT_EQ((*ours)->tensors().size(), (*theirs)->tensors().size());
  for (const TensorView& t : (*theirs)->tensors()) {
    const TensorView* mine = (*ours)->FindTensor(t.name);
    ASSERT_NE(mine, nullptr) << t.name;
    EXPECT_EQ(DTypeName(mine->dtype), DTypeName(t.dtype)) << preset_name << ": " << t.name;
    EXPECT_EQ(mine->shape, t.shape) << t.name;
  }
  for (const std::string& key : (*source)->keys()) {
    const GgufValue* a = (*source)->Find(key);
    const GgufValue* b = (*ours)->Find(key);
    ASSERT_NE(b, nullptr) << key;
    EXPECT_EQ(a->type, b->type) << key;
    if (key != "general.file_type" && a->type != GgufType::kArray) {
      EXPECT_EQ(a->i, b->i) << key;
      EXPECT_EQ(a->s, b->s) << key;
    }
    if (a->type == GgufType::kArray) {
      EXPECT_EQ(a->strings, b->strings) << key;
      EXPECT_EQ(a->ints, b->ints) << key;
      EXPECT_EQ(a->floats, b->floats) << key;
    }
  }
  EXPECT_EQ(*(*ours)->GetInt("general.file_type"), *(*theirs)->GetInt("general.file_type"));

  SessionOptions opts;
  opts.model_path = out;
  auto session = ModelSession::Open(opts);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  SequentialGenerator gen(session->get());
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 8;
  p.ignore_eos = true;
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  auto gen_out = gen.Generate(prompt, p);
  ASSERT_TRUE(gen_out.ok()) << gen_out.status().ToString();
  EXPECT_EQ(gen_out->token_ids.size(), 8u);
}

TEST(KquantQuantizeTest, RefusesQuantizedInputAndUnknownTypes) {
  if (!fs::exists(kDir + "/expected.json")) GTEST_SKIP() << "shared assets absent: " << kDir;
  auto preset = FindQuantPreset("q4_k_m");
  ASSERT_TRUE(preset.ok());
  auto r = QuantizeGguf(kDir + "/kquant-ref-Q6_K.gguf", testing::TempDir() + "/requant.gguf",
                        *preset, nullptr, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("token_embd.weight"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(fs::exists(testing::TempDir() + "/requant.gguf"));
  auto bad = FindQuantPreset("Q4_K_X");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("Q4_K_M"), std::string::npos);
}

std::vector<std::string> Files() {
  return {"kquant-ref-F16.gguf",    "kquant-ref-Q4_1.gguf",   "kquant-ref-Q5_0.gguf",
          "kquant-ref-Q5_1.gguf",   "kquant-ref-IQ4_NL.gguf", "kquant-ref-IQ4_XS.gguf",
          "kquant-ref-Q2_K.gguf",   "kquant-ref-Q3_K_S.gguf", "kquant-ref-Q3_K_M.gguf",
          "kquant-ref-Q4_K_S.gguf", "kquant-ref-Q4_K_M.gguf", "kquant-ref-Q5_K_S.gguf",
          "kquant-ref-Q5_K_M.gguf", "kquant-ref-Q6_K.gguf"};
}

INSTANTIATE_TEST_SUITE_P(Files, KquantRefTest, testing::ValuesIn(Files()),
                         [](const testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param.substr(11, i.param.size() - 16);
                           return s;
                         });

}  // namespace
}  // namespace pagellm
