// Helpers shared by the tokenizer tests: locating ../shared assets, reading llama.cpp's
// .inp/.out vectors, and random UTF-8 text.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "base/utf8.h"
#include "model/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace pagellm::testing {

inline std::string SharedPath(const std::string& rel) {
  return std::string(PAGELLM_SHARED_DIR) + "/" + rel;
}

#define SKIP_IF_MISSING(path)                                             \
  do {                                                                    \
    if (!::pagellm::FileExists(path)) GTEST_SKIP() << "missing " << path; \
  } while (0)

struct VocabVectors {
  std::vector<std::string> inputs;
  std::vector<std::vector<int32_t>> expected;
};

// llama.cpp's ggml-vocab-*.gguf.inp / .out pair (format: tokenizers/llamacpp-vocab/README.md).
inline VocabVectors ReadVocabVectors(const std::string& stem) {
  VocabVectors v;
  std::string inp =
      ReadFileToString(SharedPath("tokenizers/llamacpp-vocab/" + stem + ".inp")).value();
  std::string out =
      ReadFileToString(SharedPath("tokenizers/llamacpp-vocab/" + stem + ".out")).value();
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t pos = 0;
  for (size_t hit; (hit = inp.find(sep, pos)) != std::string::npos; pos = hit + sep.size()) {
    v.inputs.push_back(inp.substr(pos, hit - pos));
  }
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ids(line);
    std::vector<int32_t> row;
    for (int32_t id; ids >> id;) row.push_back(id);
    v.expected.push_back(row);
  }
  return v;
}

// Random valid UTF-8 mixing ASCII words, runs of spaces, newlines and tabs, 2-, 3- and 4-byte
// characters, emoji with ZWJ / variation selectors, and apostrophe contractions.
inline std::string RandomUtf8(std::mt19937& rng, size_t pieces) {
  static const char* const kFragments[] = {" ",
                                           "  ",
                                           "   ",
                                           "\n",
                                           "\n\n",
                                           "\t",
                                           " \n ",
                                           "'s",
                                           "'ll",
                                           "'RE",
                                           "...",
                                           "!!",
                                           "3",
                                           "42",
                                           "12345",
                                           "é",
                                           "ñ",
                                           "ß",
                                           "½",
                                           "Ω",
                                           "ж",
                                           "Привет",
                                           "中",
                                           "文字",
                                           "我想在",
                                           "ក",
                                           "ា",
                                           "\xE2\x80\x8D",
                                           "\xEF\xB8\x8F",
                                           "🦙",
                                           "😀",
                                           "🚀",
                                           "\xF0\x9F\x98\xB6",
                                           "\xE2\x96\x81",
                                           "<",
                                           ">",
                                           "|",
                                           "<s>",
                                           "(",
                                           ")",
                                           "-",
                                           "=",
                                           "_",
                                           "\"",
                                           "\\"};
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_int_distribution<size_t> frag(0, std::size(kFragments) - 1);
  std::uniform_int_distribution<int> len(1, 8);
  std::uniform_int_distribution<int> letter(0, 51);
  std::uniform_int_distribution<uint32_t> bmp(0xA0, 0xFFFD);
  std::uniform_int_distribution<uint32_t> astral(0x10000, 0x10FFFF);
  std::string s;
  for (size_t i = 0; i < pieces; ++i) {
    switch (kind(rng)) {
      case 0:
      case 1:
        for (int n = len(rng); n > 0; --n) {
          const int l = letter(rng);
          s.push_back(static_cast<char>(l < 26 ? 'a' + l : 'A' + l - 26));
        }
        break;
      case 2:
        s += kFragments[frag(rng)];
        break;
      default: {
        uint32_t cp = (rng() & 1) ? bmp(rng) : astral(rng);
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x4E2D;  // no surrogates
        AppendUtf8(cp, &s);
      }
    }
  }
  return s;
}

inline std::unique_ptr<Tokenizer> LoadDirOrDie(const std::string& dir) {
  auto tok = LoadTokenizerFromDir(dir);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

inline std::unique_ptr<Tokenizer> LoadGgufOrDie(const std::string& path) {
  auto gguf = GgufFile::Open(path);
  EXPECT_TRUE(gguf.ok()) << gguf.status().ToString();
  if (!gguf.ok()) return nullptr;
  auto tok = LoadTokenizerFromGguf(**gguf);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

// Loads each shared tokenizer once per test binary: the 128K/152K vocabularies take a few
// hundred milliseconds each. Null (with a failure) if loading fails.
inline const Tokenizer* CachedDir(const std::string& rel_dir) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(rel_dir);
  if (it == cache.end()) it = cache.emplace(rel_dir, LoadDirOrDie(SharedPath(rel_dir))).first;
  return it->second.get();
}
inline const Tokenizer* CachedGguf(const std::string& rel_path) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(rel_path);
  if (it == cache.end()) it = cache.emplace(rel_path, LoadGgufOrDie(SharedPath(rel_path))).first;
  return it->second.get();
}

// Length of the common prefix of `a` and `b`, cut back to a character boundary of `b`: what
// IncrementalDetokenizer treats as already shown when the prompt text is `a` and the full
// text is `b`.
inline size_t CommonPrefixAtBoundary(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  if (i == a.size()) return i;
  while (i > 0 && i < b.size() && (static_cast<uint8_t>(b[i]) & 0xC0) == 0x80) --i;
  return i;
}

}  // namespace pagellm::testing
