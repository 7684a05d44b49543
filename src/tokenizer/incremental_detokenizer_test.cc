// IncrementalDetokenizer: what it streams must equal the full decode of prompt + output minus
// the decode of the prompt, for every tokenizer kind, with multi-byte characters split across
// tokens, special tokens skipped or shown, and prompts that end mid-character.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer_test_util.h"

namespace pagellm {
namespace {

using testing::CachedDir;
using testing::CachedGguf;
using testing::SharedPath;

std::vector<const Tokenizer*> AllTokenizers() {
  std::vector<const Tokenizer*> out;
  for (const char* dir : {"models/stories260K", "tokenizers/llama2-spm", "tokenizers/mistral-v0.1",
                          "tokenizers/llama3", "tokenizers/qwen3"}) {
    if (FileExists(SharedPath(std::string(dir) + "/tokenizer.model")) ||
        FileExists(SharedPath(std::string(dir) + "/tokenizer.json"))) {
      out.push_back(CachedDir(dir));
    }
  }
  for (const char* gguf : {"tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf",
                           "tokenizers/llamacpp-vocab/ggml-vocab-gpt-2.gguf"}) {
    if (FileExists(SharedPath(gguf))) out.push_back(CachedGguf(gguf));
  }
  return out;
}

// Streams `output` after `prompt` and checks every step.
void CheckStream(const Tokenizer& tok, const std::vector<int32_t>& prompt,
                 const std::vector<int32_t>& output, bool skip_special) {
  IncrementalDetokenizer detok(tok, prompt, skip_special);
  std::string streamed;
  for (int32_t id : output) {
    const std::string piece = detok.Push(id);
    ASSERT_TRUE(IsValidUtf8(piece));
    // Held-back text is never an incomplete character shown as U+FFFD.
    streamed += piece;
  }
  streamed += detok.Flush();
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), output.begin(), output.end());
  const std::string full = tok.Decode(all, skip_special);
  const std::string head = tok.Decode(prompt, skip_special);
  const std::string expected = full.substr(testing::CommonPrefixAtBoundary(head, full));
  ASSERT_EQ(streamed, expected) << "prompt " << prompt.size() << " ids, output " << output.size();
}

TEST(IncrementalDetokenizer, EncodedRandomTextSplitAnywhere) {
  const auto tokenizers = AllTokenizers();
  if (tokenizers.empty()) GTEST_SKIP() << "no shared tokenizers";
  std::mt19937 rng(2024);
  for (const Tokenizer* tok : tokenizers) {
    ASSERT_NE(tok, nullptr);
    for (int iter = 0; iter < 150; ++iter) {
      const std::string text = testing::RandomUtf8(rng, 1 + rng() % 30);
      const std::vector<int32_t> ids = tok->Encode(text, true, /*parse_special=*/true);
      const size_t cut = rng() % (ids.size() + 1);
      const std::vector<int32_t> prompt(ids.begin(), ids.begin() + cut);
      const std::vector<int32_t> output(ids.begin() + cut, ids.end());
      CheckStream(*tok, prompt, output, /*skip_special=*/true);
      CheckStream(*tok, prompt, output, /*skip_special=*/false);
    }
  }
}

// Byte tokens one at a time: every multi-byte character arrives split (SentencePiece
// <0xNN> pieces; byte-level single-byte tokens).
TEST(IncrementalDetokenizer, CharactersSplitIntoBytes) {
  for (const Tokenizer* tok : AllTokenizers()) {
    std::vector<int32_t> output;
    for (unsigned char c : std::string("a🦙中ñ\xE2\x82")) {  // ends inside a character
      char hex[8];
      std::snprintf(hex, sizeof(hex), "<0x%02X>", c);
      auto id = tok->PieceToId(hex);
      if (!id) id = tok->Encode(std::string(1, static_cast<char>(c)), false, false).front();
      output.push_back(*id);
    }
    IncrementalDetokenizer detok(*tok, std::vector<int32_t>{}, true);
    std::vector<std::string> pieces;
    for (int32_t id : output) pieces.push_back(detok.Push(id));
    const std::string tail = detok.Flush();
    std::string streamed;
    for (const auto& p : pieces) {
      EXPECT_EQ(p.find("\xEF\xBF\xBD"), std::string::npos);
      streamed += p;
    }
    EXPECT_EQ(streamed, "a🦙中ñ");
    EXPECT_EQ(tail, "\xEF\xBF\xBD");
  }
}

TEST(IncrementalDetokenizer, RandomIds) {
  const auto tokenizers = AllTokenizers();
  if (tokenizers.empty()) GTEST_SKIP() << "no shared tokenizers";
  std::mt19937 rng(77);
  for (const Tokenizer* tok : tokenizers) {
    std::uniform_int_distribution<int32_t> any(0, tok->vocab_size() - 1);
    std::uniform_int_distribution<int32_t> low(0, std::min(tok->vocab_size() - 1, 300));
    for (int iter = 0; iter < 100; ++iter) {
      std::vector<int32_t> prompt, output;
      // Low ids hold the special tokens of SentencePiece vocabularies and the single bytes.
      for (int n = rng() % 8; n > 0; --n) prompt.push_back((rng() & 1) ? any(rng) : low(rng));
      for (int n = rng() % 40; n > 0; --n) output.push_back((rng() & 1) ? any(rng) : low(rng));
      CheckStream(*tok, prompt, output, (iter & 1) != 0);
    }
  }
}

// SentencePiece: a window starting after only special tokens still drops the dummy-prefix
// space; after text it keeps it.
TEST(IncrementalDetokenizer, SentencePieceLeadingSpace) {
  SKIP_IF_MISSING(SharedPath("models/stories260K/tokenizer.model"));
  const Tokenizer* tok = CachedDir("models/stories260K");
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> prompt(12, 1);  // BOS x 12: the window starts after them
  const std::vector<int32_t> once = {403, 407, 261, 378};
  CheckStream(*tok, prompt, once, true);
  CheckStream(*tok, prompt, once, false);
  IncrementalDetokenizer detok(*tok, prompt, true);
  std::string text;
  for (int32_t id : once) text += detok.Push(id);
  text += detok.Flush();
  EXPECT_EQ(text, "Once upon a time");
  // A long generation: the window keeps moving and the ids are trimmed.
  IncrementalDetokenizer long_run(*tok, std::vector<int32_t>{1, 403}, true);
  std::string streamed;
  std::vector<int32_t> all = {1, 403};
  for (int i = 0; i < 5000; ++i) {
    const int32_t id = 259 + i % 200;
    all.push_back(id);
    streamed += long_run.Push(id);
  }
  streamed += long_run.Flush();
  EXPECT_EQ("Once" + streamed, tok->Decode(all, true));
}

TEST(IncrementalDetokenizer, StoriesContinuation) {
  SKIP_IF_MISSING(SharedPath("models/stories260K/tokenizer.model"));
  const Tokenizer* tok = CachedDir("models/stories260K");
  ASSERT_NE(tok, nullptr);
  IncrementalDetokenizer detok(*tok, std::vector<int32_t>{1, 274, 287, 269, 317, 263, 377, 267},
                               true);
  std::string text;
  for (int32_t id : {265, 282, 295, 433, 426, 13, 436}) text += detok.Push(id);
  text += detok.Flush();
  EXPECT_EQ(text, " the park.\n\"");
}

}  // namespace
}  // namespace pagellm
