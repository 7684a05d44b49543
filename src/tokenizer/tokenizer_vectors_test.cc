// llama.cpp's tokenizer conformance vectors (46 strings each): plain encoding, no BOS/EOS, no
// special-token parsing, must match exactly. Each vector set runs against every tokenizer file
// in ../shared that implements that vocabulary.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace pagellm
