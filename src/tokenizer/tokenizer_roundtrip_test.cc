// Properties over random text: decode(encode(s)) round trips, agreement of the GGUF
// SentencePiece implementation with libsentencepiece, robustness to invalid UTF-8, and speed.
#include <gtest/gtest.h>

#include <time.h>

#include <chrono>

#include "tokenizer/tokenizer_test_util.h"

namespace pagellm {
namespace {

using testing::CachedDir;
using testing::CachedGguf;
using testing::SharedPath;

struct Named {
  const char* name;
  const Tokenizer* tok;
  bool metaspace = false;  // SentencePiece-style: a literal "▁" in the text decodes as " "
};

std::string MetaspaceToSpace(const std::string& s) {
  std::string out;
  for (size_t pos = 0; pos < s.size();) {
    if (s.compare(pos, 3, "\xE2\x96\x81") == 0) {
      out.push_back(' ');
      pos += 3;
    } else {
      out.push_back(s[pos++]);
    }
  }
  return out;
}

// Tokenizers whose round trip is exact on any valid UTF-8: the byte-level ones (bytes map
// back one to one) and the byte-fallback SentencePiece ones without whitespace normalization
// (Llama-2, Mistral: the dummy-prefix "▁" is the one space Decode drops again, and every
// other character is a piece or byte pieces). The one exception for the latter: "▁" itself is
// SentencePiece's escaped space, so it comes back as " ".
std::vector<Named> ExactRoundTripTokenizers() {
  std::vector<Named> out;
  auto add_dir = [&](const char* name, const std::string& rel, const char* file, bool spm) {
    if (FileExists(SharedPath(rel + "/" + file))) out.push_back({name, CachedDir(rel), spm});
  };
  auto add_gguf = [&](const char* name, const std::string& rel, bool spm) {
    if (FileExists(SharedPath(rel))) out.push_back({name, CachedGguf(rel), spm});
  };
  add_dir("llama3", "tokenizers/llama3", "tokenizer.json", false);
  add_dir("qwen3", "tokenizers/qwen3", "tokenizer.json", false);
  add_gguf("gpt2-gguf", "tokenizers/llamacpp-vocab/ggml-vocab-gpt-2.gguf", false);
  add_dir("llama2-spm", "tokenizers/llama2-spm", "tokenizer.model", true);
  add_gguf("llama-spm-gguf", "tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf", true);
  add_dir("mistral", "tokenizers/mistral-v0.1", "tokenizer.json", true);
  return out;
}

TEST(TokenizerRoundTrip, RandomUtf8IsExact) {
  const auto tokenizers = ExactRoundTripTokenizers();
  if (tokenizers.empty()) GTEST_SKIP() << "no shared tokenizers";
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 300; ++iter) {
    const std::string text = testing::RandomUtf8(rng, 1 + rng() % 40);
    for (const Named& t : tokenizers) {
      ASSERT_NE(t.tok, nullptr) << t.name;
      const auto ids = t.tok->Encode(text, /*add_special=*/true, /*parse_special=*/false);
      ASSERT_EQ(t.tok->Decode(ids, /*skip_special=*/true),
                t.metaspace ? MetaspaceToSpace(text) : text)
          << t.name;
    }
  }
}

// tok512 normalizes whitespace (runs of spaces collapse, leading/trailing spaces go), so the
// property there is: for text made of ASCII words and runs of spaces, decode(encode(s)) is
// the words joined by single spaces.
TEST(TokenizerRoundTrip, Tok512CollapsesSpaces) {
  SKIP_IF_MISSING(SharedPath("models/stories260K/tokenizer.model"));
  const Tokenizer* tok = CachedDir("models/stories260K");
  ASSERT_NE(tok, nullptr);
  std::mt19937 rng(5);
  for (int iter = 0; iter < 300; ++iter) {
    std::string text, expected;
    for (int w = rng() % 8; w >= 0; --w) {
      text.append((text.empty() ? 0 : 1) + rng() % 4, ' ');
      std::string word;
      for (int n = 1 + rng() % 7; n > 0; --n) word.push_back(static_cast<char>('a' + rng() % 26));
      text += word;
      if (!expected.empty()) expected.push_back(' ');
      expected += word;
      text.append(rng() % 3, ' ');
    }
    EXPECT_EQ(tok->Decode(tok->Encode(text, true, false), true), expected) << "\"" << text << "\"";
  }
}

// The GGUF vocabulary of Llama-2 goes through our own SentencePiece BPE; the same vocabulary
// as tokenizer.model goes through libsentencepiece. They must agree id for id.
TEST(TokenizerRoundTrip, GgufSpmAgreesWithLibSentencePiece) {
  SKIP_IF_MISSING(SharedPath("tokenizers/llama2-spm/tokenizer.model"));
  SKIP_IF_MISSING(SharedPath("tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf"));
  const Tokenizer* lib = CachedDir("tokenizers/llama2-spm");
  const Tokenizer* ours = CachedGguf("tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(lib, nullptr);
  ASSERT_NE(ours, nullptr);
  std::mt19937 rng(99);
  for (int iter = 0; iter < 1000; ++iter) {
    const std::string text = testing::RandomUtf8(rng, 1 + rng() % 30);
    ASSERT_EQ(ours->Encode(text, true, false), lib->Encode(text, true, false)) << text;
  }
  const std::string sample = SharedPath("data/tinystories_sample.txt");
  if (FileExists(sample)) {
    const std::string text = ReadFileToString(sample).value().substr(0, 200000);
    EXPECT_EQ(ours->Encode(text, false, false), lib->Encode(text, false, false));
  }
}

// Arbitrary bytes never crash. Byte-level BPE and our SentencePiece BPE keep every byte (an
// invalid one becomes its own byte token), so decoding gives the input with the invalid
// sequences replaced by U+FFFD (one per maximal invalid subpart). libsentencepiece replaces
// them while normalizing, one U+FFFD per byte, so it only has to give valid UTF-8.
TEST(TokenizerRoundTrip, InvalidUtf8) {
  const auto tokenizers = ExactRoundTripTokenizers();
  if (tokenizers.empty()) GTEST_SKIP() << "no shared tokenizers";
  std::mt19937 rng(42);
  for (int iter = 0; iter < 300; ++iter) {
    std::string text = testing::RandomUtf8(rng, 1 + rng() % 10);
    for (int n = 1 + rng() % 4; n > 0; --n) {
      text.insert(text.begin() + rng() % (text.size() + 1), static_cast<char>(0x80 + rng() % 128));
    }
    for (const Named& t : tokenizers) {
      const auto ids = t.tok->Encode(text, true, false);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < t.tok->vocab_size()) << t.name;
      const std::string decoded = t.tok->Decode(ids, true);
      EXPECT_TRUE(IsValidUtf8(decoded)) << t.name;
      if (std::string(t.name) == "llama2-spm") continue;
      EXPECT_EQ(decoded, t.metaspace ? MetaspaceToSpace(RepairUtf8(text)) : RepairUtf8(text))
          << t.name;
    }
  }
}

// CPU time of this thread in milliseconds: timings stay meaningful on a loaded machine.
double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Timing on a ~2,000-token TinyStories prompt (reported; the bound only catches gross
// regressions, since sanitizer and debug builds are much slower).
TEST(TokenizerRoundTrip, EncodeSpeed) {
  const std::string sample = SharedPath("data/tinystories_sample.txt");
  SKIP_IF_MISSING(sample);
  const std::string text = ReadFileToString(sample).value().substr(0, 8500);
  for (const Named& t : ExactRoundTripTokenizers()) {
    std::vector<int32_t> ids;
    const double start = ThreadCpuMs();
    constexpr int kReps = 20;
    for (int i = 0; i < kReps; ++i) ids = t.tok->Encode(text, true, false);
    const double ms = (ThreadCpuMs() - start) / kReps;
    std::printf("encode %-16s %5zu tokens: %.3f ms CPU\n", t.name, ids.size(), ms);
    EXPECT_LT(ms, 100.0) << t.name;
  }
}

TEST(TokenizerRoundTrip, LoadSpeed) {
  for (const char* rel : {"tokenizers/qwen3", "tokenizers/llama3"}) {
    SKIP_IF_MISSING(SharedPath(std::string(rel) + "/tokenizer.json"));
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = ThreadCpuMs();
    auto tok = LoadTokenizerFromDir(SharedPath(rel));
    const double cpu_ms = ThreadCpuMs() - cpu_start;
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    std::printf("load %s: %.1f ms CPU, %.1f ms wall\n", rel, cpu_ms, ms);
    EXPECT_LT(cpu_ms, 5000.0);
  }
}

}  // namespace
}  // namespace pagellm
