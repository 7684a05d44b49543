// llama.cpp's tokenizer conformance vectors (46 strings each): plain encoding, no BOS/EOS, no
// special-token parsing, must match exactly. Each vector set runs against every tokenizer file
// in ../shared that implements that vocabulary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/test_file_writers.h"
#include "tokenizer/regex_splitter.h"
#include "tokenizer/tokenizer_test_util.h"

namespace pagellm {
namespace {

using testing::SharedPath;

std::string Show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    s.push_back(' ');
    s += std::to_string(id);
  }
  return s;
}

void ExpectVectors(const Tokenizer& tok, const std::string& stem) {
  const testing::VocabVectors v = testing::ReadVocabVectors(stem);
  ASSERT_EQ(v.inputs.size(), 46u);
  ASSERT_EQ(v.expected.size(), v.inputs.size());
  int failures = 0;
  for (size_t i = 0; i < v.inputs.size(); ++i) {
    const auto ids = tok.Encode(v.inputs[i], /*add_special=*/false, /*parse_special=*/false);
    if (ids != v.expected[i]) ++failures;
    EXPECT_EQ(Show(ids), Show(v.expected[i])) << "string #" << i << ": \"" << v.inputs[i] << "\"";
  }
  EXPECT_EQ(failures, 0);
}

TEST(TokenizerVectors, LlamaSpmGguf) {
  const std::string path = SharedPath("tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf");
  SKIP_IF_MISSING(path);
  auto tok = testing::LoadGgufOrDie(path);
  ASSERT_NE(tok, nullptr);
  ExpectVectors(*tok, "ggml-vocab-llama-spm.gguf");
}

TEST(TokenizerVectors, LlamaSpmSentencePieceModel) {
  const std::string dir = SharedPath("tokenizers/llama2-spm");
  SKIP_IF_MISSING(dir + "/tokenizer.model");
  auto tok = testing::LoadDirOrDie(dir);
  ASSERT_NE(tok, nullptr);
  ExpectVectors(*tok, "ggml-vocab-llama-spm.gguf");
}

TEST(TokenizerVectors, Gpt2Gguf) {
  const std::string path = SharedPath("tokenizers/llamacpp-vocab/ggml-vocab-gpt-2.gguf");
  SKIP_IF_MISSING(path);
  auto tok = testing::LoadGgufOrDie(path);
  ASSERT_NE(tok, nullptr);
  ExpectVectors(*tok, "ggml-vocab-gpt-2.gguf");
}

TEST(TokenizerVectors, Llama3TokenizerJson) {
  const std::string dir = SharedPath("tokenizers/llama3");
  SKIP_IF_MISSING(dir + "/tokenizer.json");
  auto tok = testing::LoadDirOrDie(dir);
  ASSERT_NE(tok, nullptr);
  ExpectVectors(*tok, "ggml-vocab-llama-bpe.gguf");
}

TEST(TokenizerVectors, Qwen3TokenizerJson) {
  const std::string dir = SharedPath("tokenizers/qwen3");
  SKIP_IF_MISSING(dir + "/tokenizer.json");
  auto tok = testing::LoadDirOrDie(dir);
  ASSERT_NE(tok, nullptr);
  ExpectVectors(*tok, "ggml-vocab-qwen2.gguf");
}

// The byte-level vocabularies of tokenizer.json written out as a vocab-only GGUF, as
// llama.cpp's converter does ("gpt2" model, merges as "a b", special added tokens control,
// the others user-defined, the pre-tokenizer by name). Exercises the GGUF byte-level path and
// its built-in regexes for "llama-bpe" and "qwen2" against the same vectors.
std::string GgufFromTokenizerJson(const std::string& path, const std::string& pre) {
  const nlohmann::json j = nlohmann::json::parse(ReadFileToString(path).value());
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto set = [&](size_t id, const std::string& piece, int32_t type) {
    if (id >= tokens.size()) {
      tokens.resize(id + 1);
      types.resize(id + 1, 5);
    }
    tokens[id] = piece;
    types[id] = type;
  };
  for (const auto& [piece, id] : j["model"]["vocab"].items()) set(id.get<size_t>(), piece, 1);
  for (const auto& t : j["added_tokens"]) {
    set(t["id"].get<size_t>(), t["content"].get<std::string>(), t["special"].get<bool>() ? 3 : 4);
  }
  std::vector<std::string> merges;
  for (const auto& m : j["model"]["merges"]) {
    merges.push_back(m.is_string() ? m.get<std::string>()
                                   : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  testing::GgufBuilder b;
  b.AddString("general.architecture", "llama");
  b.AddString("tokenizer.ggml.model", "gpt2");
  b.AddString("tokenizer.ggml.pre", pre);
  b.AddStringArray("tokenizer.ggml.tokens", tokens);
  testing::ByteWriter type_array;
  type_array.Put<uint32_t>(testing::kGgufI32).Put<uint64_t>(types.size());
  for (int32_t t : types) type_array.Put(t);
  b.AddRaw("tokenizer.ggml.token_type", testing::kGgufArray, type_array.bytes());
  b.AddStringArray("tokenizer.ggml.merges", merges);
  return b.Build();
}

void ExpectGgufVectors(const std::string& json_path, const std::string& pre,
                       const std::string& stem) {
  const std::string bytes = GgufFromTokenizerJson(json_path, pre);
  auto gguf = GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), pre);
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  auto tok = LoadTokenizerFromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  ExpectVectors(**tok, stem);
}

TEST(TokenizerVectors, Llama3AsGguf) {
  const std::string path = SharedPath("tokenizers/llama3/tokenizer.json");
  SKIP_IF_MISSING(path);
  ExpectGgufVectors(path, "llama-bpe", "ggml-vocab-llama-bpe.gguf");
}

TEST(TokenizerVectors, Qwen3AsGguf) {
  const std::string path = SharedPath("tokenizers/qwen3/tokenizer.json");
  SKIP_IF_MISSING(path);
  ExpectGgufVectors(path, "qwen2", "ggml-vocab-qwen2.gguf");
}

// The built-in patterns for GGUF pre names are the ones these tokenizer.json files carry.
TEST(TokenizerVectors, BuiltInPatternsMatchTokenizerJson) {
  for (const auto& [dir, pattern] : {std::pair{"tokenizers/llama3", kLlama3Pattern},
                                     std::pair{"tokenizers/qwen3", kQwen2Pattern}}) {
    const std::string path = SharedPath(std::string(dir) + "/tokenizer.json");
    SKIP_IF_MISSING(path);
    const nlohmann::json j = nlohmann::json::parse(ReadFileToString(path).value());
    EXPECT_EQ(j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"].get<std::string>(),
              pattern);
  }
}

}  // namespace
}  // namespace pagellm
