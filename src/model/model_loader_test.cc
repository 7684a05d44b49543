// Tests for the config parsers and LoadModel: synthetic GGUF files and HF directories (valid,
// then with missing or mis-shaped tensors and bad configs), and the real models in ../shared.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "base/half.h"
#include "model/config_parser.h"
#include "model/gguf_file.h"
#include "model/model_weights.h"
#include "model/safetensors_file.h"
#include "model/test_file_writers.h"

namespace pagellm {
namespace {

using nlohmann::json;
using testing::GgufBuilder;
using testing::SafetensorsBuilder;
using testing::TempDir;
using testing::TinyModelSpec;

template <typename T>
void ExpectError(const StatusOr<T>& r, StatusCode code, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  for (const std::string& p : parts) {
    EXPECT_NE(r.status().message().find(p), std::string::npos)
        << "'" << p << "' not in: " << r.status().message();
  }
}

// ------------------------------------------------------------------------- HF config.json

StatusOr<ModelConfig> Hf(const json& j) {
  return ParseHfConfig(j.dump(), "cfg/config.json");
}

TEST(ParseHfConfig, TinyLlama) {
  auto c = Hf(testing::TinyHfConfig(TinyModelSpec{}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Architecture::kLlama);
  EXPECT_EQ(c->hf_architecture, "LlamaForCausalLM");
  EXPECT_EQ(c->hidden_size, 32);
  EXPECT_EQ(c->intermediate_size, 64);
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->vocab_size, 64);
  EXPECT_EQ(c->max_position_embeddings, 128);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_FALSE(c->rope_interleaved);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kNone);
}

TEST(ParseHfConfig, DefaultsAndVariants) {
  json j = testing::TinyHfConfig(TinyModelSpec{});
  j.erase("num_key_value_heads");
  j.erase("head_dim");
  j.erase("tie_word_embeddings");
  j["eos_token_id"] = {2, 3};
  j["torch_dtype"] = "bfloat16";
  j["rope_scaling"] = nullptr;
  auto c = Hf(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(c->weight_dtype, DType::kBF16);

  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  c = Hf(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 2.0f);

  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  c = Hf(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 8.0f);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);

  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(Hf(j)->rope_scaling.type, RopeScalingType::kNone);
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  ExpectError(Hf(j), StatusCode::kUnimplemented, {"cfg/config.json", "'yarn'"});
  j["rope_scaling"] = {{"rope_type", "linear"}};
  ExpectError(Hf(j), StatusCode::kInvalidArgument, {"cfg/config.json", "'factor'"});
}

TEST(ParseHfConfig, MistralAndQwen2) {
  json j = testing::TinyHfConfig(TinyModelSpec{});
  j["architectures"] = {"MistralForCausalLM"};
  EXPECT_EQ(Hf(j)->sliding_window, 4096);  // transformers default
  j["sliding_window"] = nullptr;
  EXPECT_EQ(Hf(j)->sliding_window, 0);
  j["sliding_window"] = 64;
  EXPECT_EQ(Hf(j)->sliding_window, 64);
  EXPECT_EQ(Hf(j)->arch, Architecture::kMistral);

  j["architectures"] = {"Qwen2ForCausalLM"};
  j["sliding_window"] = 32768;
  j["use_sliding_window"] = false;
  auto c = Hf(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, Architecture::kQwen2);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_FALSE(c->rope_interleaved);
  EXPECT_EQ(c->sliding_window, 0);
  j["use_sliding_window"] = true;
  j["max_window_layers"] = 1;
  ExpectError(Hf(j), StatusCode::kUnimplemented, {"cfg/config.json", "max_window_layers"});
  j["max_window_layers"] = 2;  // no layer reaches the window
  EXPECT_EQ(Hf(j)->sliding_window, 0);
}

TEST(ParseHfConfig, UnknownArchitectureListsSupported) {
  json j = testing::TinyHfConfig(TinyModelSpec{});
  j["architectures"] = {"GPT2LMHeadModel"};
  ExpectError(Hf(j), StatusCode::kInvalidArgument,
              {"cfg/config.json", "unsupported architecture 'GPT2LMHeadModel'", "LlamaForCausalLM",
               "MistralForCausalLM", "Qwen2ForCausalLM"});
  j.erase("architectures");
  ExpectError(Hf(j), StatusCode::kInvalidArgument, {"cfg/config.json", "architectures"});
  j["architectures"] = json::array();
  ExpectError(Hf(j), StatusCode::kInvalidArgument, {"architectures"});
}

TEST(ParseHfConfig, BadFields) {
  const json base = testing::TinyHfConfig(TinyModelSpec{});
  struct Case {
    const char* key;
    json value;  // null erases the key
    StatusCode code;
    const char* needle;
  };
  const Case cases[] = {
      {"hidden_size", nullptr, StatusCode::kInvalidArgument, "'hidden_size'"},
      {"hidden_size", "32", StatusCode::kInvalidArgument, "'hidden_size'"},
      {"hidden_size", 32.5, StatusCode::kInvalidArgument, "'hidden_size'"},
      {"hidden_size", 1e12, StatusCode::kInvalidArgument, "'hidden_size'"},
      {"hidden_size", int64_t{1} << 40, StatusCode::kOutOfRange, "'hidden_size'"},
      {"hidden_size", -32, StatusCode::kInvalidArgument, "hidden_size"},
      {"num_attention_heads", 0, StatusCode::kInvalidArgument, "num_attention_heads"},
      {"num_key_value_heads", 3, StatusCode::kInvalidArgument, "num_kv_heads"},
      {"num_key_value_heads", 8, StatusCode::kInvalidArgument, "num_kv_heads"},
      {"head_dim", 7, StatusCode::kInvalidArgument, "head_dim"},
      {"head_dim", 512, StatusCode::kInvalidArgument, "head_dim"},
      {"vocab_size", 0, StatusCode::kInvalidArgument, "vocab_size"},
      {"rms_norm_eps", -1.0, StatusCode::kInvalidArgument, "rms_norm_eps"},
      {"rope_theta", "big", StatusCode::kInvalidArgument, "'rope_theta'"},
      {"rope_scaling", 3, StatusCode::kInvalidArgument, "rope_scaling"},
      {"tie_word_embeddings", 1, StatusCode::kInvalidArgument, "'tie_word_embeddings'"},
      {"eos_token_id", 64, StatusCode::kInvalidArgument, "eos_token_id"},
      {"eos_token_id", json::array({1, "x"}), StatusCode::kInvalidArgument, "'eos_token_id'"},
      {"bos_token_id", json::array({1, 2}), StatusCode::kInvalidArgument, "'bos_token_id'"},
      {"attention_bias", true, StatusCode::kUnimplemented, "attention_bias"},
      {"mlp_bias", true, StatusCode::kUnimplemented, "mlp_bias"},
      {"hidden_act", "gelu", StatusCode::kUnimplemented, "'gelu'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.key) + " = " + c.value.dump());
    json j = base;
    if (c.value.is_null()) {
      j.erase(c.key);
    } else {
      j[c.key] = c.value;
    }
    ExpectError(Hf(j), c.code, {"cfg/config.json", c.needle});
  }
  ExpectError(ParseHfConfig("{not json", "x/config.json"), StatusCode::kInvalidArgument,
              {"x/config.json", "JSON"});
  ExpectError(ParseHfConfig("[]", "x/config.json"), StatusCode::kInvalidArgument,
              {"x/config.json", "object"});
}

TEST(ParseGenerationConfig, DefaultsAndOverrides) {
  ModelConfig c = *Hf(testing::TinyHfConfig(TinyModelSpec{}));
  LoadedModel::GenerationDefaults d;
  const json g = {
      {"temperature", 0.7},        {"top_p", 0.9},      {"top_k", 40},           {"min_p", 0.05},
      {"repetition_penalty", 1.1}, {"bos_token_id", 3}, {"eos_token_id", {4, 5}}};
  ASSERT_TRUE(ParseGenerationConfig(g.dump(), "gen.json", &c, &d).ok());
  EXPECT_FLOAT_EQ(d.temperature, 0.7f);
  EXPECT_FLOAT_EQ(d.top_p, 0.9f);
  EXPECT_EQ(d.top_k, 40);
  EXPECT_FLOAT_EQ(d.min_p, 0.05f);
  EXPECT_FLOAT_EQ(d.repetition_penalty, 1.1f);
  EXPECT_EQ(c.bos_token_id, 3);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{4, 5}));

  LoadedModel::GenerationDefaults empty;
  ASSERT_TRUE(ParseGenerationConfig("{}", "gen.json", &c, &empty).ok());
  EXPECT_EQ(empty.temperature, -1);
  EXPECT_EQ(empty.top_k, -1);

  Status s = ParseGenerationConfig(R"({"top_p": 1.5})", "gen.json", &c, &d);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("gen.json"), std::string::npos);
  EXPECT_NE(s.message().find("top_p"), std::string::npos);
  EXPECT_FALSE(ParseGenerationConfig(R"({"eos_token_id": 1000})", "gen.json", &c, &d).ok());
  EXPECT_FALSE(ParseGenerationConfig("nope", "gen.json", &c, &d).ok());
}

// ------------------------------------------------------------------------------- GGUF

StatusOr<std::unique_ptr<LoadedModel>> LoadGgufBytes(const std::string& bytes,
                                                     std::vector<uint8_t>* storage) {
  storage->assign(bytes.begin(), bytes.end());
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> g,
                   GgufFile::Parse(storage->data(), storage->size(), "tiny.gguf"));
  return LoadGgufModel(std::move(g));
}

void ExpectTinyShapes(const LoadedModel& m, const TinyModelSpec& s) {
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.hidden_size, s.hidden);
  EXPECT_EQ(c.num_layers, s.layers);
  EXPECT_EQ(c.vocab_size, s.vocab);
  const ModelWeights& w = m.weights;
  EXPECT_EQ(w.embed.rows, s.vocab);
  EXPECT_EQ(w.embed.cols, s.hidden);
  ASSERT_EQ(w.layers.size(), static_cast<size_t>(s.layers));
  for (const LayerWeights& l : w.layers) {
    EXPECT_EQ(l.attn_norm.size(), static_cast<size_t>(s.hidden));
    EXPECT_EQ(l.wq.rows, s.heads * s.head_dim);
    EXPECT_EQ(l.wk.rows, s.kv_heads * s.head_dim);
    EXPECT_EQ(l.wv.rows, s.kv_heads * s.head_dim);
    EXPECT_EQ(l.wo.cols, s.heads * s.head_dim);
    EXPECT_EQ(l.w_gate.rows, s.intermediate);
    EXPECT_EQ(l.w_down.cols, s.intermediate);
    EXPECT_EQ(l.bq.size(), s.attention_bias ? static_cast<size_t>(s.heads * s.head_dim) : 0u);
    EXPECT_EQ(l.bk.size(), s.attention_bias ? static_cast<size_t>(s.kv_heads * s.head_dim) : 0u);
  }
  EXPECT_EQ(w.final_norm.size(), static_cast<size_t>(s.hidden));
  EXPECT_EQ(c.tie_word_embeddings, s.tied);
  EXPECT_EQ(w.lm_head.data == w.embed.data, s.tied);
  const int64_t h = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  int64_t params = s.vocab * h * (s.tied ? 1 : 2) + h +
                   s.layers * (2 * h + 2 * q * h + 2 * kv * h + 3 * s.intermediate * h);
  if (s.attention_bias) params += s.layers * (q + 2 * kv);
  EXPECT_EQ(w.num_parameters, params);
}

TEST(LoadGgufModel, TinyVariants) {
  struct Variant {
    uint32_t matrix, norm;
    bool tied, bias;
    DType dtype;
  };
  const Variant variants[] = {
      {testing::kGgmlF32, testing::kGgmlF32, true, false, DType::kF32},
      {testing::kGgmlF16, testing::kGgmlBF16, false, false, DType::kF16},
      {testing::kGgmlBF16, testing::kGgmlF16, true, true, DType::kBF16},
      {testing::kGgmlQ8_0, testing::kGgmlF32, false, false, DType::kQ8_0},
      {testing::kGgmlQ4_0, testing::kGgmlF32, true, true, DType::kQ4_0},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(std::string(DTypeName(v.dtype)));
    TinyModelSpec s;
    s.matrix_type = v.matrix;
    s.norm_type = v.norm;
    s.tied = v.tied;
    s.attention_bias = v.bias;
    std::vector<uint8_t> storage;
    auto m = LoadGgufBytes(testing::TinyGguf(s).Build(), &storage);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ((*m)->format, "gguf");
    EXPECT_EQ((*m)->config.arch, v.bias ? Architecture::kQwen2 : Architecture::kLlama);
    EXPECT_EQ((*m)->config.rope_interleaved, !v.bias);
    EXPECT_EQ((*m)->config.weight_dtype, v.dtype);
    EXPECT_EQ((*m)->config.eos_token_ids, (std::vector<int32_t>{2}));
    ExpectTinyShapes(**m, s);
    // Matrices are views into the bytes, not copies; norms are converted to float32.
    const GgufFile& g = *(*m)->gguf;
    const TensorView* q = g.FindTensor("blk.1.attn_q.weight");
    EXPECT_EQ((*m)->weights.layers[1].wq.data, q->data);
    EXPECT_EQ((*m)->weights.layers[1].wq.dtype, v.dtype);
    const TensorView* n = g.FindTensor("blk.0.ffn_norm.weight");
    uint16_t h0;
    std::memcpy(&h0, n->data, 2);
    float expect;
    if (v.norm == testing::kGgmlF32) {
      std::memcpy(&expect, n->data, 4);
    } else {
      expect = v.norm == testing::kGgmlF16 ? F16ToF32(h0) : Bf16ToF32(h0);
    }
    EXPECT_EQ((*m)->weights.layers[0].ffn_norm[0], expect);
    int64_t bytes = 0;
    for (const TensorView& t : g.tensors()) bytes += t.nbytes;
    EXPECT_EQ((*m)->weights.total_bytes, bytes);
  }
}

TEST(LoadGgufModel, MissingAndMisshapedTensors) {
  TinyModelSpec s;
  std::vector<uint8_t> storage;
  GgufBuilder extra = testing::TinyGguf(s);
  extra.AddTensor("blk.1.extra", {32}, testing::kGgmlF32);
  ASSERT_TRUE(LoadGgufBytes(extra.Build(), &storage).ok());  // unknown non-bias tensors are ignored

  // A model declaring more layers than it has tensors for.
  const GgufBuilder t = testing::TinyGguf(s);
  std::string bytes = t.Build();
  const std::string key = "llama.block_count";
  const size_t at = bytes.find(key) + key.size() + 4;  // past the key and its type id
  const uint32_t three = 3;
  std::memcpy(&bytes[at], &three, 4);
  ExpectError(LoadGgufBytes(bytes, &storage), StatusCode::kNotFound,
              {"tiny.gguf", "missing tensor 'blk.2.attn_norm.weight'"});

  // Shape mismatch: wider feed-forward in metadata than in the tensors.
  bytes = t.Build();
  const std::string ff = "llama.feed_forward_length";
  const uint32_t wide = 96;
  std::memcpy(&bytes[bytes.find(ff) + ff.size() + 4], &wide, 4);
  ExpectError(LoadGgufBytes(bytes, &storage), StatusCode::kInvalidArgument,
              {"tiny.gguf", "'blk.0.ffn_gate.weight'", "expected shape [96, 32], got [64, 32]"});
}

TEST(LoadGgufModel, UnusedBiasAndBadArchitecture) {
  std::vector<uint8_t> storage;
  GgufBuilder b = testing::TinyGguf(TinyModelSpec{});
  b.AddTensor("blk.0.attn_output.bias", {32}, testing::kGgmlF32);
  ExpectError(LoadGgufBytes(b.Build(), &storage), StatusCode::kUnimplemented,
              {"tiny.gguf", "'blk.0.attn_output.bias'"});

  std::string bytes = testing::TinyGguf(TinyModelSpec{}).Build();
  const size_t at = bytes.find("llama");  // value of general.architecture
  bytes.replace(at, 5, "gpt2x");
  ExpectError(LoadGgufBytes(bytes, &storage), StatusCode::kInvalidArgument,
              {"tiny.gguf", "'gpt2x'", "llama, qwen2"});

  TinyModelSpec more_tokens;
  GgufBuilder t = testing::TinyGguf(more_tokens);
  t.AddU32("llama.vocab_size", 32);  // fewer than the 64 tokens
  ExpectError(LoadGgufBytes(t.Build(), &storage), StatusCode::kInvalidArgument,
              {"tiny.gguf", "'tokenizer.ggml.tokens' has 64 tokens"});

  GgufBuilder none;
  none.AddString("general.architecture", "llama");
  ExpectError(LoadGgufBytes(none.Build(), &storage), StatusCode::kNotFound,
              {"tiny.gguf", "'llama.embedding_length'"});
}

TEST(LoadGgufModel, Llama3RopeFreqs) {
  TinyModelSpec s;
  s.head_dim = 64;
  s.heads = 1;
  s.kv_heads = 1;
  const double factor = 8, low = 1, high = 4, orig = 8192;
  std::string freqs;
  for (int i = 0; i < 32; ++i) {
    const double wavelen = 2 * M_PI * std::pow(10000.0, 2.0 * i / 64);
    double r = 1;
    if (wavelen > orig / low) {
      r = factor;
    } else if (wavelen >= orig / high) {
      const double smooth = (orig / wavelen - low) / (high - low);
      r = 1 / ((1 - smooth) / factor + smooth);
    }
    const float f = static_cast<float>(r);
    freqs.append(reinterpret_cast<const char*>(&f), 4);
  }
  std::vector<uint8_t> storage;
  GgufBuilder b = testing::TinyGguf(s);
  b.AddTensor("rope_freqs.weight", {32}, testing::kGgmlF32, freqs);
  auto m = LoadGgufBytes(b.Build(), &storage);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->config.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_FLOAT_EQ((*m)->config.rope_scaling.factor, 8.0f);

  EXPECT_EQ((*m)->config.rope_freq_divisors.size(), 32u);

  const float nan = std::nanf("");
  std::memcpy(&freqs[4 * 20], &nan, 4);  // a corrupt divisor
  GgufBuilder bad = testing::TinyGguf(s);
  bad.AddTensor("rope_freqs.weight", {32}, testing::kGgmlF32, freqs);
  ExpectError(LoadGgufBytes(bad.Build(), &storage), StatusCode::kDataLoss,
              {"tiny.gguf", "rope_freqs.weight"});
}

// ------------------------------------------------------------------------ HF directories

// Writes config.json, generation_config.json and model.safetensors (or two shards + index).
// `skip` drops a tensor; `reshape` replaces one tensor's shape.
void WriteHfModel(const TempDir& dir, const TinyModelSpec& s, const std::string& dtype = "F32",
                  bool sharded = false, const std::string& skip = "",
                  const std::string& reshape = "", std::vector<int64_t> new_shape = {}) {
  dir.Write("config.json", testing::TinyHfConfig(s).dump(2));
  dir.Write("generation_config.json",
            R"({"temperature": 0.6, "top_k": 20, "eos_token_id": [2, 3]})");
  SafetensorsBuilder shards[2];
  json weight_map = json::object();
  int k = 0;
  for (auto [name, shape] : testing::TinyHfTensors(s)) {
    if (name == skip) continue;
    if (name == reshape) shape = new_shape;
    const int shard = sharded ? (k++ % 2) : 0;
    shards[shard].Add(name, dtype, shape);
    weight_map[name] = "model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors";
  }
  if (!sharded) {
    dir.Write("model.safetensors", shards[0].Build());
    return;
  }
  dir.Write("model-00001-of-00002.safetensors", shards[0].Build());
  dir.Write("model-00002-of-00002.safetensors", shards[1].Build());
  dir.Write("model.safetensors.index.json",
            json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());
}

TEST(LoadModel, HfDirectory) {
  for (const char* dtype : {"F32", "F16", "BF16"}) {
    for (bool tied : {true, false}) {
      SCOPED_TRACE(std::string(dtype) + (tied ? " tied" : " untied"));
      TempDir dir;
      TinyModelSpec s;
      s.tied = tied;
      s.attention_bias = std::string(dtype) == "BF16";  // Qwen2 with q/k/v biases
      WriteHfModel(dir, s, dtype);
      auto m = LoadModel(dir.path() + "/");
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      EXPECT_EQ((*m)->format, "safetensors");
      EXPECT_EQ((*m)->path, dir.path());
      EXPECT_FALSE((*m)->config.rope_interleaved);
      EXPECT_EQ((*m)->safetensors.size(), 1u);
      ExpectTinyShapes(**m, s);
      EXPECT_FLOAT_EQ((*m)->generation_defaults.temperature, 0.6f);
      EXPECT_EQ((*m)->generation_defaults.top_k, 20);
      EXPECT_EQ((*m)->generation_defaults.top_p, -1);
      EXPECT_EQ((*m)->config.eos_token_ids, (std::vector<int32_t>{2, 3}));
      const SafetensorsFile& f = *(*m)->safetensors[0];
      EXPECT_EQ((*m)->weights.embed.data, f.FindTensor("model.embed_tokens.weight")->data);
      EXPECT_EQ(DTypeName((*m)->config.weight_dtype), dtype);
    }
  }
}

TEST(LoadModel, ShardedDirectory) {
  TempDir dir;
  TinyModelSpec s;
  s.tied = false;
  WriteHfModel(dir, s, "F32", /*sharded=*/true);
  auto m = LoadModel(dir.path());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->safetensors.size(), 2u);  // each shard opened once
  ExpectTinyShapes(**m, s);

  // A shard name that escapes the directory is refused.
  json index = json::parse(*ReadFileToString(dir.path() + "/model.safetensors.index.json"));
  index["weight_map"]["model.norm.weight"] = "../model-00001-of-00002.safetensors";
  dir.Write("model.safetensors.index.json", index.dump());
  ExpectError(LoadModel(dir.path()), StatusCode::kInvalidArgument,
              {"model.safetensors.index.json", "'model.norm.weight'"});
  // A tensor mapped to a shard that does not hold it.
  index["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors";
  index["weight_map"]["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors";
  dir.Write("model.safetensors.index.json", index.dump());
  ExpectError(LoadModel(dir.path()), StatusCode::kNotFound,
              {"model.safetensors.index.json", "'model.embed_tokens.weight'"});
  // A missing shard file.
  index["weight_map"]["model.embed_tokens.weight"] = "model-00003-of-00002.safetensors";
  dir.Write("model.safetensors.index.json", index.dump());
  ExpectError(LoadModel(dir.path()), StatusCode::kNotFound, {"model-00003-of-00002.safetensors"});
  dir.Write("model.safetensors.index.json", "{\"weight_map\": 3}");
  ExpectError(LoadModel(dir.path()), StatusCode::kInvalidArgument,
              {"model.safetensors.index.json", "weight_map"});
}

TEST(LoadModel, BrokenDirectories) {
  TinyModelSpec s;
  {
    TempDir dir;
    WriteHfModel(dir, s, "F32", false, "model.layers.1.mlp.up_proj.weight");
    ExpectError(
        LoadModel(dir.path()), StatusCode::kNotFound,
        {dir.path() + "/model.safetensors", "missing tensor 'model.layers.1.mlp.up_proj.weight'"});
  }
  {
    TempDir dir;
    WriteHfModel(dir, s, "F32", false, "", "model.layers.0.self_attn.k_proj.weight", {32, 32});
    ExpectError(LoadModel(dir.path()), StatusCode::kInvalidArgument,
                {"model.safetensors", "'model.layers.0.self_attn.k_proj.weight'",
                 "expected shape [16, 32], got [32, 32]"});
  }
  {
    TempDir dir;
    WriteHfModel(dir, s);
    json cfg = testing::TinyHfConfig(s);
    cfg["architectures"] = {"FalconForCausalLM"};
    dir.Write("config.json", cfg.dump());
    ExpectError(LoadModel(dir.path()), StatusCode::kInvalidArgument,
                {"config.json", "'FalconForCausalLM'", "LlamaForCausalLM", "Qwen2ForCausalLM"});
    dir.Write("config.json", "{");
    ExpectError(LoadModel(dir.path()), StatusCode::kInvalidArgument, {"config.json"});
    std::filesystem::remove(dir.path() + "/config.json");
    ExpectError(LoadModel(dir.path()), StatusCode::kNotFound, {"config.json"});
  }
  {
    TempDir dir;
    WriteHfModel(dir, s);
    dir.Write("generation_config.json", R"({"temperature": "hot"})");
    ExpectError(LoadModel(dir.path()), StatusCode::kInvalidArgument,
                {"generation_config.json", "'temperature'"});
    std::filesystem::remove(dir.path() + "/generation_config.json");
    EXPECT_TRUE(LoadModel(dir.path()).ok());
    std::filesystem::remove(dir.path() + "/model.safetensors");
    ExpectError(LoadModel(dir.path()), StatusCode::kNotFound, {"model.safetensors"});
    dir.Write("model.safetensors", "garbage!garbage!");
    ExpectError(LoadModel(dir.path()), StatusCode::kDataLoss, {"model.safetensors"});
    ExpectError(LoadModel(dir.path() + "/model.safetensors"), StatusCode::kInvalidArgument,
                {"model directory"});
  }
  {
    TempDir dir;  // a q_proj bias in a Llama checkpoint would be silently ignored
    WriteHfModel(dir, s);
    SafetensorsBuilder b;
    for (const auto& [name, shape] : testing::TinyHfTensors(s)) b.Add(name, "F32", shape);
    b.Add("model.layers.0.self_attn.o_proj.bias", "F32", {32});
    dir.Write("model.safetensors", b.Build());
    ExpectError(LoadModel(dir.path()), StatusCode::kUnimplemented,
                {"model.safetensors", "'model.layers.0.self_attn.o_proj.bias'"});
  }
  ExpectError(LoadModel("/nonexistent/model"), StatusCode::kNotFound, {"/nonexistent/model"});
}

// fp8 KV cache scales in vLLM's names: scalars, per layer; precedence k_scale >
// k_proj.output_scale > kv_scale; malformed ones are clean errors naming the tensor.
std::string F32Bytes(float v) {
  std::string b(4, '\0');
  std::memcpy(b.data(), &v, 4);
  return b;
}
std::string HalfBytes(uint16_t h) {
  std::string b(2, '\0');
  std::memcpy(b.data(), &h, 2);
  return b;
}

struct ScaleTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string data;
};

StatusOr<std::unique_ptr<LoadedModel>> LoadWithScales(const TempDir& dir, const TinyModelSpec& s,
                                                      const std::vector<ScaleTensor>& extra) {
  WriteHfModel(dir, s);
  SafetensorsBuilder b;
  for (const auto& [name, shape] : testing::TinyHfTensors(s)) b.Add(name, "F32", shape);
  for (const ScaleTensor& t : extra) b.Add(t.name, t.dtype, t.shape, t.data);
  dir.Write("model.safetensors", b.Build());
  return LoadModel(dir.path());
}

TEST(LoadModel, KvCacheScales) {
  TinyModelSpec s;  // 2 layers
  const std::string l0 = "model.layers.0.self_attn.", l1 = "model.layers.1.self_attn.";
  {
    TempDir dir;
    auto m = LoadWithScales(dir, s, {});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    for (const LayerWeights& l : (*m)->weights.layers) {
      EXPECT_EQ(l.kv_k_scale, 0.0f);
      EXPECT_EQ(l.kv_v_scale, 0.0f);
    }
  }
  {
    TempDir dir;
    auto plain = LoadWithScales(dir, s, {});
    ASSERT_TRUE(plain.ok());
    const int64_t params = (*plain)->weights.num_parameters;
    auto m = LoadWithScales(
        dir, s,
        {{l0 + "k_scale", "F32", {}, F32Bytes(0.5f)},
         {l0 + "v_scale", "BF16", {1}, HalfBytes(F32ToBf16(0.25f))},
         {l0 + "kv_scale", "F32", {}, F32Bytes(9.0f)},  // shadowed by k_scale / v_scale
         {l1 + "kv_scale", "F16", {}, HalfBytes(F32ToF16(2.0f))},
         {l1 + "k_proj.output_scale", "F32", {1}, F32Bytes(0.125f)}});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const auto& layers = (*m)->weights.layers;
    EXPECT_EQ(layers[0].kv_k_scale, 0.5f);
    EXPECT_EQ(layers[0].kv_v_scale, 0.25f);
    EXPECT_EQ(layers[1].kv_k_scale, 0.125f);  // output_scale before the legacy kv_scale
    EXPECT_EQ(layers[1].kv_v_scale, 2.0f);
    EXPECT_EQ((*m)->weights.num_parameters, params);  // scales are not parameters
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const ScaleTensor& bad : std::vector<ScaleTensor>{
           {l1 + "v_scale", "F32", {2}, F32Bytes(1.0f) + F32Bytes(1.0f)},  // not a scalar
           {l1 + "k_scale", "F32", {1, 1}, F32Bytes(1.0f)},
           {l0 + "k_scale", "F32", {}, F32Bytes(nan)},
           {l0 + "k_scale", "F32", {}, F32Bytes(std::numeric_limits<float>::infinity())},
           {l0 + "v_scale", "F16", {}, HalfBytes(F32ToF16(0.0f))},
           {l0 + "kv_scale", "BF16", {}, HalfBytes(F32ToBf16(-1.0f))},
           {l1 + "v_proj.output_scale", "F32", {}, F32Bytes(-0.5f)}}) {
    SCOPED_TRACE(bad.name);
    TempDir dir;
    ExpectError(LoadWithScales(dir, s, {bad}), StatusCode::kInvalidArgument,
                {"model.safetensors", "'" + bad.name + "'"});
  }
  {
    TempDir dir;  // a dtype the safetensors reader does not load at all
    ExpectError(LoadWithScales(dir, s, {{l0 + "k_scale", "F64", {}, std::string(8, '\0')}}),
                StatusCode::kUnimplemented, {"model.safetensors", l0 + "k_scale", "F64"});
  }
}

// -------------------------------------------------------------------- real shared models

std::string Shared(const std::string& rel) {
  return std::string(PAGELLM_SHARED_DIR) + "/" + rel;
}

TEST(SharedModels, Stories260KGguf) {
  const std::string path = Shared("models/stories260K/stories260K.gguf");
  if (!FileExists(path)) GTEST_SKIP() << "shared assets absent";
  auto g = GgufFile::Open(path);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)->version(), 3u);
  EXPECT_EQ((*g)->tensors().size(), 48u);
  EXPECT_EQ(*(*g)->GetString("general.architecture"), "llama");
  EXPECT_EQ(*(*g)->GetInt("llama.block_count"), 5);

  auto m = LoadModel(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ModelConfig& c = (*m)->config;
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_TRUE(c.rope_interleaved);
  EXPECT_EQ((*m)->weights.embed.dtype, DType::kF32);
  EXPECT_EQ(c.tie_word_embeddings, (*g)->FindTensor("output.weight") == nullptr);
  EXPECT_EQ((*m)->weights.num_parameters, 260032 + (c.tie_word_embeddings ? 0 : 512 * 64));
}

struct SharedDirModel {
  const char* dir;
  int hidden, intermediate, head_dim, vocab, context;
  int64_t params;
};

TEST(SharedModels, SafetensorsDirectories) {
  const SharedDirModel models[] = {
      {"models/stories260K", 64, 172, 8, 512, 512, 260032},
      {"models/llama2xs-279K", 64, 192, 8, 512, 256, 279232},
      {"models/babyllama-tok105", 128, 352, 16, 105, 256, 936448},
  };
  for (const SharedDirModel& e : models) {
    const std::string dir = Shared(e.dir);
    if (!FileExists(dir + "/config.json")) GTEST_SKIP() << "shared assets absent";
    SCOPED_TRACE(dir);
    auto m = LoadModel(dir);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const ModelConfig& c = (*m)->config;
    EXPECT_EQ(c.arch, Architecture::kLlama);
    EXPECT_EQ(c.hidden_size, e.hidden);
    EXPECT_EQ(c.intermediate_size, e.intermediate);
    EXPECT_EQ(c.num_layers, 5);
    EXPECT_EQ(c.num_heads, 8);
    EXPECT_EQ(c.num_kv_heads, 4);
    EXPECT_EQ(c.head_dim, e.head_dim);
    EXPECT_EQ(c.vocab_size, e.vocab);
    EXPECT_EQ(c.max_position_embeddings, e.context);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_FALSE(c.rope_interleaved);
    EXPECT_EQ(c.bos_token_id, 1);
    EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{2}));
    EXPECT_EQ((*m)->weights.num_parameters, e.params);
    EXPECT_EQ((*m)->weights.total_bytes, e.params * 4);
  }
}

// The GGUF and safetensors copies of stories260K hold the same values; q/k rows differ by the
// RoPE layout permutation (HF row j*d/2 + i = GGUF row 2i + j within each head).
TEST(SharedModels, GgufMatchesSafetensorsUpToRopePermutation) {
  const std::string gguf = Shared("models/stories260K/stories260K.gguf");
  if (!FileExists(gguf)) GTEST_SKIP() << "shared assets absent";
  auto g = LoadModel(gguf);
  auto h = LoadModel(Shared("models/stories260K"));
  ASSERT_TRUE(g.ok() && h.ok());
  const ModelWeights& gw = (*g)->weights;
  const ModelWeights& hw = (*h)->weights;
  auto row = [](const WeightMatrix& m, int64_t r) {
    std::vector<float> v(m.cols);
    std::memcpy(v.data(), m.row(r), m.cols * 4);
    return v;
  };
  EXPECT_EQ(std::memcmp(gw.embed.data, hw.embed.data, gw.embed.nbytes()), 0);
  EXPECT_EQ(gw.final_norm, hw.final_norm);
  const int d = 8;
  for (size_t l = 0; l < gw.layers.size(); ++l) {
    const LayerWeights& a = gw.layers[l];
    const LayerWeights& b = hw.layers[l];
    EXPECT_EQ(a.attn_norm, b.attn_norm);
    EXPECT_EQ(std::memcmp(a.wv.data, b.wv.data, a.wv.nbytes()), 0);
    EXPECT_EQ(std::memcmp(a.w_down.data, b.w_down.data, a.w_down.nbytes()), 0);
    for (const auto& [ga, hb] : {std::pair(&a.wq, &b.wq), std::pair(&a.wk, &b.wk)}) {
      for (int64_t head = 0; head < ga->rows / d; ++head) {
        for (int i = 0; i < d / 2; ++i) {
          for (int j = 0; j < 2; ++j) {
            ASSERT_EQ(row(*hb, head * d + j * d / 2 + i), row(*ga, head * d + 2 * i + j))
                << "layer " << l << " head " << head;
          }
        }
      }
    }
  }
}

TEST(SharedModels, VocabOnlyGguf) {
  const std::string path = Shared("tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf");
  if (!FileExists(path)) GTEST_SKIP() << "shared assets absent";
  auto g = GgufFile::Open(path);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto tokens = (*g)->GetArray("tokenizer.ggml.tokens", GgufType::kString);
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_EQ((*tokens)->strings.size(), 32000u);
  auto m = LoadModel(path);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(path), std::string::npos) << m.status().message();
}

}  // namespace
}  // namespace pagellm
