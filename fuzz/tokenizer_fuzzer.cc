// libFuzzer target for the tokenizers: arbitrary bytes (including invalid UTF-8) are encoded
// and decoded by small in-memory vocabularies of both kinds (byte-level BPE and
// SentencePiece-style BPE with byte fallback), and by a GGUF vocabulary when
// PAGELLM_FUZZ_GGUF names one. Checked: no crash, ids in range, valid UTF-8 out, exact round
// trips where the tokenizer guarantees them, incremental detokenization equal to the full
// decode, arbitrary ids decoding safely, and the input itself parsed as a tokenizer.json.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/utf8.h"
#include "model/gguf_file.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {
namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// GPT-2's byte alphabet, spelled out so this file does not depend on the implementation.
std::string BytePiece(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  int cp = b;
  if (!printable) cp = b < 33 ? 256 + b : b == 0xAD ? 256 + 67 : 256 + 33 + (b - 127);
  std::string s;
  AppendUtf8(static_cast<uint32_t>(cp), &s);
  return s;
}

std::string ByteLevelJson() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[BytePiece(b)] = b;
  const char* merged[] = {"\xC4\xA0t", "he", "\xC4\xA0the", "in", "\xC4\xA0\xC4\xA0"};
  nlohmann::json merges = {"\xC4\xA0 t", "h e", "\xC4\xA0t he", "i n", "\xC4\xA0 \xC4\xA0"};
  int id = 256;
  for (const char* m : merged) vocab[m] = id++;
  nlohmann::json j = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", true}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern",
            {{"Regex",
              "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
              "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
              "\\s+(?!\\S)|\\s+"}}},
           {"behavior", "Isolated"}},
          {{"type", "ByteLevel"}, {"use_regex", false}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens",
       {{{"id", 300}, {"content", "<|eot|>"}, {"special", true}},
        {{"id", 301}, {"content", "<think>"}, {"special", false}}}}};
  return j.dump();
}

std::string MetaspaceJson() {
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  char hex[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    vocab[hex] = 3 + b;
  }
  int id = 259;
  for (const char* p : {"\xE2\x96\x81", "t", "h", "e", "a", "\xE2\x96\x81t", "he",
                        "\xE2\x96\x81the", "\xC3\xA9", "\xE4\xB8\xAD"}) {
    vocab[p] = id++;
  }
  nlohmann::json j = {
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", {"\xE2\x96\x81 t", "h e", "\xE2\x96\x81t he"}},
        {"byte_fallback", true},
        {"fuse_unk", true},
        {"unk_token", "<unk>"}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}}},
      {"added_tokens",
       {{{"id", 0}, {"content", "<unk>"}, {"special", true}},
        {{"id", 1}, {"content", "<s>"}, {"special", true}},
        {{"id", 2}, {"content", "</s>"}, {"special", true}}}}};
  return j.dump();
}

std::string MetaspaceToSpace(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 3, "\xE2\x96\x81") == 0) {
      out.push_back(' ');
      i += 3;
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

struct Subject {
  std::unique_ptr<Tokenizer> tok;
  bool byte_level = false;
  bool metaspace = false;  // decode(encode(x)) == x with "▁" as " " (invalid bytes repaired)
};

std::vector<Subject> MakeSubjects() {
  std::vector<Subject> out;
  auto add_json = [&](const std::string& json, bool byte_level) {
    auto hf = ParseHfTokenizerJson(json, "fuzz vocabulary");
    Check(hf.ok());
    Subject s;
    s.tok = std::move(hf->tokenizer);
    s.tok->set_bos_id(byte_level ? 300 : 1);
    s.tok->set_add_bos(true);
    s.byte_level = byte_level;
    s.metaspace = !byte_level;
    out.push_back(std::move(s));
  };
  add_json(ByteLevelJson(), true);
  add_json(MetaspaceJson(), false);
  if (const char* path = std::getenv("PAGELLM_FUZZ_GGUF")) {
    auto gguf = GgufFile::Open(path);
    if (gguf.ok()) {
      auto tok = LoadTokenizerFromGguf(**gguf);
      if (tok.ok()) out.push_back(Subject{std::move(tok).value(), false, false});
    }
  }
  return out;
}

void FuzzOne(const Subject& s, std::string_view text) {
  const Tokenizer& tok = *s.tok;
  for (bool special : {false, true}) {
    const std::vector<int32_t> ids = tok.Encode(text, special, special);
    for (int32_t id : ids) Check(id >= 0 && id < tok.vocab_size());
    const std::string decoded = tok.Decode(ids, /*skip_special=*/false);
    Check(IsValidUtf8(decoded));
    if (!special) {
      const std::string repaired = RepairUtf8(text);
      if (s.byte_level) Check(decoded == repaired);
      if (s.metaspace) Check(decoded == MetaspaceToSpace(repaired));
    }
    // Streaming the ids (split after a prefix of them) must give the same text.
    const size_t cut = text.empty() ? 0 : static_cast<uint8_t>(text[0]) % (ids.size() + 1);
    std::vector<int32_t> prompt(ids.begin(), ids.begin() + cut);
    IncrementalDetokenizer detok(tok, prompt, special);
    std::string streamed;
    for (size_t i = cut; i < ids.size(); ++i) streamed += detok.Push(ids[i]);
    streamed += detok.Flush();
    const std::string full = tok.Decode(ids, special);
    const std::string head = tok.Decode(prompt, special);
    size_t common = 0;
    while (common < head.size() && common < full.size() && head[common] == full[common]) ++common;
    if (common < head.size()) {
      while (common > 0 && common < full.size() &&
             (static_cast<uint8_t>(full[common]) & 0xC0) == 0x80) {
        --common;
      }
    }
    Check(streamed == full.substr(common));
  }
  // The bytes as arbitrary (also negative and out-of-range) ids.
  std::vector<int32_t> raw(text.size() / 4);
  if (!raw.empty()) std::memcpy(raw.data(), text.data(), raw.size() * 4);
  for (int32_t& id : raw) {
    if (id % 3 != 0) id = static_cast<int32_t>(static_cast<uint32_t>(id) % (tok.vocab_size() + 2));
  }
  Check(IsValidUtf8(tok.Decode(raw, false)));
  Check(IsValidUtf8(tok.Decode(raw, true)));
  for (int32_t id : raw) (void)tok.IdToPiece(id);
}

}  // namespace
}  // namespace pagellm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<pagellm::Subject> subjects = pagellm::MakeSubjects();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& s : subjects) pagellm::FuzzOne(s, text);
  // The input as a tokenizer.json: loads or fails with a Status, never crashes.
  if (size > 0 && data[0] == '{') (void)pagellm::ParseHfTokenizerJson(text, "fuzz input");
  return 0;
}
