// Loading and the special-token / BOS / decode semantics of each shared tokenizer.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_test_util.h"

namespace pagellm {
namespace {

using testing::CachedDir;
using testing::CachedGguf;
using testing::SharedPath;

std::vector<int32_t> ParseIds(const std::string& text) {
  std::istringstream in(text);
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

// --- stories260K (tok512 SentencePiece) -------------------------------------------------

struct StoriesPrompt {
  const char* text;
  const char* prompt_ids;
  const char* output_ids;
  const char* continuation;
};

// models/stories260K/EXPECTED.md section 2.
const StoriesPrompt kStoriesPrompts[] = {
    {"Once upon a time", "1 403 407 261 378",
     "432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 419 292 411 322 "
     "265 282 295 433 426 385 328 432 358 394 261 370 432 352 266 268 388 426 338 391 266 267 "
     "337 335 312 432 398 312 286 267 414 270 333 415 426 13 438 310 439 419 357 336",
     ", there was a little girl named Lily. She loved to play outside in the park. One day, she "
     "saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said"},
    {"The little dog", "1 291 376 400 428",
     "286 261 376 298 315 421 395 317 426 338 401 396 267 337 335 311 267 422 419 269 311 267 "
     "422 419 426 385 328 432 358 394 261 370 268 414 444 335 261 370 268 414 444 426 359 413 "
     "286 261 370 432 352 266 268 388 426 338 391 266 267 337 335 312 432 398 358 279",
     " was a little girl named Lily. She loved to play with her toys and her toys. One day, she "
     "saw a big box with a big box. It was a big, red ball. She wanted to play with it, but she "
     "d"},
    {"Tom and Lily went to", "1 274 287 269 317 263 377 267",
     "265 282 295 433 426 342 394 261 370 268 414 444 335 261 370 268 414 444 426 342 391 266 "
     "267 337 335 312 426 342 391 266 267 337 335 265 268 414 444 426 342 391 266 267 337 335 "
     "265 268 414 444 426 13 436 438 347 433 432 392 287 443 436 274 287 336 426 313",
     " the park. They saw a big box with a big box. They wanted to play with it. They wanted to "
     "play with the box. They wanted to play with the box.\n\"Look, Mom!\" Tom said. \""},
};

void CheckStories(const Tokenizer& tok) {
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_FALSE(tok.add_eos());
  for (const StoriesPrompt& p : kStoriesPrompts) {
    const std::vector<int32_t> prompt = ParseIds(p.prompt_ids);
    EXPECT_EQ(tok.Encode(p.text, /*add_special=*/true, /*parse_special=*/false), prompt) << p.text;
    EXPECT_EQ(tok.Decode(prompt, /*skip_special=*/true), p.text);
    std::vector<int32_t> all = prompt;
    const std::vector<int32_t> output = ParseIds(p.output_ids);
    all.insert(all.end(), output.begin(), output.end());
    const std::string full = tok.Decode(all, true);
    const std::string head = tok.Decode(prompt, true);
    ASSERT_TRUE(full.starts_with(head));
    EXPECT_EQ(full.substr(head.size()), p.continuation);
  }
}

TEST(StoriesTokenizer, SentencePieceModelMatchesExpected) {
  SKIP_IF_MISSING(SharedPath("models/stories260K/tokenizer.model"));
  const Tokenizer* tok = CachedDir("models/stories260K");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 512);
  CheckStories(*tok);
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{1, 403, 407, 261, 378}, false), "<s>Once upon a time");
  EXPECT_EQ(tok->IdToPiece(403), "\xE2\x96\x81Once");
  EXPECT_EQ(tok->PieceToId("<0x0A>"), 13);
  EXPECT_TRUE(tok->IsSpecial(1));
  EXPECT_FALSE(tok->IsSpecial(403));
  EXPECT_EQ(tok->stop_ids(), std::vector<int32_t>{2});
}

TEST(StoriesTokenizer, GgufMatchesExpected) {
  SKIP_IF_MISSING(SharedPath("models/stories260K/stories260K.gguf"));
  const Tokenizer* tok = CachedGguf("models/stories260K/stories260K.gguf");
  ASSERT_NE(tok, nullptr);
  CheckStories(*tok);
}

// The 200-token greedy text from BOS (EXPECTED.md section 1): 464 bytes.
TEST(StoriesTokenizer, BosReferenceText) {
  SKIP_IF_MISSING(SharedPath("models/stories260K/tokenizer.model"));
  const Tokenizer* tok = CachedDir("models/stories260K");
  ASSERT_NE(tok, nullptr);
  std::vector<int32_t> ids = {1};
  const auto out = ParseIds(
      "403 407 261 378 432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 "
      "419 292 411 322 265 282 295 433 426 385 328 432 358 394 261 370 432 352 266 268 388 426 "
      "338 391 266 267 337 335 312 432 398 312 286 267 414 270 333 415 426 13 438 310 439 419 "
      "357 336 432 313 438 310 432 278 316 439 419 298 414 267 265 282 295 433 426 436 317 286 "
      "296 418 269 279 292 416 439 413 409 416 327 263 415 294 267 400 426 338 336 432 313 442 "
      "391 267 337 335 364 420 268 388 432 398 359 280 303 439 413 272 417 264 312 426 436 13 "
      "438 310 286 296 418 269 279 292 416 439 413 409 416 327 263 415 294 267 400 426 338 336 "
      "432 313 442 439 423 262 304 420 422 432 317 426 359 279 292 416 439 413 409 416 327 263 "
      "415 294 267 400 426 436 13 438 310 279 292 416 439 413 391 267 281 421 427 311 357 432 "
      "384 358");
  ids.insert(ids.end(), out.begin(), out.end());
  ASSERT_EQ(out.size(), 200u);
  const std::string text = tok->Decode(ids, true);
  EXPECT_EQ(text.size(), 464u);
  EXPECT_TRUE(text.starts_with("Once upon a time, there was a little girl named Lily.")) << text;
  EXPECT_TRUE(text.ends_with("Lily didn't want to help her mom, so she")) << text;
}

// data/tinystories_first20_tok512_ids.txt: 20 stories encoded with BOS (6,425 ids).
TEST(StoriesTokenizer, PerplexitySplitIds) {
  const std::string sample = SharedPath("data/tinystories_sample.txt");
  const std::string ids_path = SharedPath("data/tinystories_first20_tok512_ids.txt");
  SKIP_IF_MISSING(sample);
  SKIP_IF_MISSING(ids_path);
  const Tokenizer* tok = CachedDir("models/stories260K");
  ASSERT_NE(tok, nullptr);
  const std::string text = ReadFileToString(sample).value();
  std::istringstream lines(ReadFileToString(ids_path).value());
  const std::string sep = "<|endoftext|>";
  size_t pos = 0;
  size_t total = 0;
  for (int story = 0; story < 20; ++story) {
    const size_t end = text.find(sep, pos);
    ASSERT_NE(end, std::string::npos);
    std::string piece = text.substr(pos, end - pos);
    pos = end + sep.size();
    const size_t first = piece.find_first_not_of(" \t\n\r");
    const size_t last = piece.find_last_not_of(" \t\n\r");
    piece = first == std::string::npos ? "" : piece.substr(first, last - first + 1);
    std::string line;
    ASSERT_TRUE(std::getline(lines, line));
    const std::vector<int32_t> expected = ParseIds(line);
    EXPECT_EQ(tok->Encode(piece, true, false), expected) << "story " << story;
    total += expected.size();
  }
  EXPECT_EQ(total, 6425u);
}

// --- Llama-2 SentencePiece (tokenizer.model and GGUF) -----------------------------------

TEST(LlamaSpmTokenizer, SpecialTokensAndDecode) {
  SKIP_IF_MISSING(SharedPath("tokenizers/llama2-spm/tokenizer.model"));
  SKIP_IF_MISSING(SharedPath("tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf"));
  for (const Tokenizer* tok : {CachedDir("tokenizers/llama2-spm"),
                               CachedGguf("tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf")}) {
    ASSERT_NE(tok, nullptr);
    EXPECT_EQ(tok->vocab_size(), 32000);
    EXPECT_EQ(tok->Encode("Hello", true, false), (std::vector<int32_t>{1, 15043}));
    // Each text piece after a special token gets its own dummy prefix (HF legacy, llama.cpp).
    EXPECT_EQ(tok->Encode("<s>Hello</s>", false, true), (std::vector<int32_t>{1, 15043, 2}));
    EXPECT_NE(tok->Encode("<s>", false, false), (std::vector<int32_t>{1}));
    // The dummy prefix goes; a real leading space stays.
    EXPECT_EQ(tok->Decode(tok->Encode(" Hello", true, false), true), " Hello");
    EXPECT_EQ(tok->Decode(tok->Encode("Hello\n\nworld", true, false), true), "Hello\n\nworld");
    // Byte-fallback pieces join into UTF-8; a lone lead byte is U+FFFD.
    const std::vector<int32_t> llama = tok->Encode("🦙", false, false);
    EXPECT_EQ(tok->Decode(llama, true), "🦙");
    EXPECT_EQ(tok->Decode(std::vector<int32_t>(llama.begin(), llama.end() - 1), true),
              "\xEF\xBF\xBD");
    EXPECT_EQ(tok->Decode(std::vector<int32_t>{15043, 1, 2}, false), "Hello<s></s>");
    EXPECT_EQ(tok->Decode(std::vector<int32_t>{15043, 1, 2}, true), "Hello");
  }
}

// --- Mistral v0.1 tokenizer.json (SentencePiece-style BPE with merges) ------------------

TEST(MistralTokenizer, MetaspaceBpeWithByteFallback) {
  SKIP_IF_MISSING(SharedPath("tokenizers/mistral-v0.1/tokenizer.json"));
  const Tokenizer* tok = CachedDir("tokenizers/mistral-v0.1");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->Encode("Hello", true, false), (std::vector<int32_t>{1, 22557}));
  EXPECT_EQ(tok->PieceToId("\xE2\x96\x81"), 28705);
  const auto inst = tok->Encode("[INST]", false, false);
  ASSERT_GE(inst.size(), 2u);
  EXPECT_EQ(inst[0], 733);    // "▁["
  EXPECT_EQ(inst[1], 16289);  // "INST"
  EXPECT_EQ(tok->Encode("<s>Hello</s>", false, true), (std::vector<int32_t>{1, 22557, 2}));
  // "\n" is not a piece: it falls back to <0x0A>.
  const auto nl = tok->Encode("a\nb", false, false);
  EXPECT_NE(std::find(nl.begin(), nl.end(), *tok->PieceToId("<0x0A>")), nl.end());
  EXPECT_EQ(tok->Decode(nl, true), "a\nb");
  EXPECT_EQ(tok->Decode(tok->Encode("  two spaces", true, false), true), "  two spaces");
}

// --- Llama-3 / Qwen3 tokenizer.json, GPT-2 GGUF (byte-level BPE) ------------------------

TEST(Llama3Tokenizer, ConfigAndSpecialTokens) {
  SKIP_IF_MISSING(SharedPath("tokenizers/llama3/tokenizer.json"));
  const Tokenizer* tok = CachedDir("tokenizers/llama3");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 128256);
  EXPECT_EQ(tok->bos_id(), 128000);
  EXPECT_EQ(tok->eos_id(), 128001);
  EXPECT_TRUE(tok->add_bos());  // bos_token <|begin_of_text|>: prepended although the
                                // post-processor is ByteLevel-only
  EXPECT_FALSE(tok->add_eos());
  EXPECT_EQ(tok->bos_token(), "<|begin_of_text|>");
  EXPECT_FALSE(tok->chat_template().empty());
  EXPECT_NE(std::find(tok->stop_ids().begin(), tok->stop_ids().end(), 128001),
            tok->stop_ids().end());
  const auto hello = tok->Encode("Hello world", false, false);
  std::vector<int32_t> with_bos = {128000};
  with_bos.insert(with_bos.end(), hello.begin(), hello.end());
  EXPECT_EQ(tok->Encode("Hello world", true, false), with_bos);
  EXPECT_EQ(tok->Encode("<|eot_id|>", false, true), (std::vector<int32_t>{128009}));
  EXPECT_GT(tok->Encode("<|eot_id|>", false, false).size(), 1u);  // plain text
  EXPECT_TRUE(tok->IsSpecial(128009));
  std::vector<int32_t> ids =
      tok->Encode("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", false, true);
  EXPECT_EQ(ids.front(), 128006);
  EXPECT_EQ(ids.back(), 128009);
  EXPECT_EQ(tok->Decode(ids, false), "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  EXPECT_EQ(tok->Decode(ids, true), "user\n\nHi");
  EXPECT_EQ(tok->IdToPiece(*tok->PieceToId("\xC4\xA0the")), "\xC4\xA0the");  // "Ġthe"
}

TEST(Qwen3Tokenizer, ConfigAndAddedTokens) {
  SKIP_IF_MISSING(SharedPath("tokenizers/qwen3/tokenizer.json"));
  const Tokenizer* tok = CachedDir("tokenizers/qwen3");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 151669);
  EXPECT_EQ(tok->bos_id(), -1);
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->eos_id(), 151645);  // <|im_end|>
  EXPECT_EQ(tok->stop_ids(), std::vector<int32_t>{151645});
  EXPECT_FALSE(tok->chat_template().empty());
  EXPECT_EQ(tok->Encode("Hi", true, false), tok->Encode("Hi", false, false));
  // <think> is a non-special added token: always one token, and not skipped on decode.
  const auto think = *tok->PieceToId("<think>");
  EXPECT_EQ(tok->Encode("<think>", false, false), std::vector<int32_t>{think});
  EXPECT_FALSE(tok->IsSpecial(think));
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{think}, true), "<think>");
  // <|im_start|> is special: only with parse_special.
  EXPECT_EQ(tok->Encode("<|im_start|>", false, true), std::vector<int32_t>{151644});
  EXPECT_GT(tok->Encode("<|im_start|>", false, false).size(), 1u);
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{151644, 151645}, true), "");
}

TEST(Gpt2Tokenizer, GgufSpecialTokens) {
  SKIP_IF_MISSING(SharedPath("tokenizers/llamacpp-vocab/ggml-vocab-gpt-2.gguf"));
  const Tokenizer* tok = CachedGguf("tokenizers/llamacpp-vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->eos_id(), 50256);
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->Encode("<|endoftext|>", false, true), std::vector<int32_t>{50256});
  EXPECT_EQ(tok->Encode("Hello world", false, false), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{15496, 995, 50256}, false),
            "Hello world<|endoftext|>");
  EXPECT_EQ(tok->Decode(std::vector<int32_t>{15496, 995, 50256}, true), "Hello world");
}

// --- Loader behaviour on synthetic directories -----------------------------------------

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("pagellm_tok_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string path() const { return path_.string(); }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

// A byte-level vocabulary: the 256 byte tokens, "ab" (from the merge "a b"), two added tokens.
std::string TinyByteLevelJson(const std::string& post_processor = "null") {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) {
    std::string piece;
    AppendUtf8(b < 33                   ? 256 + b
               : (b >= 127 && b <= 160) ? 256 + 33 + (b - 127)
               : b == 173               ? 256 + 67
                                        : b,
               &piece);
    vocab[piece] = b;
  }
  vocab["ab"] = 256;
  nlohmann::json j = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"post_processor", nlohmann::json::parse(post_processor)},
      {"added_tokens",
       {{{"id", 257}, {"content", "<bos>"}, {"special", true}},
        {{"id", 258}, {"content", "<eos>"}, {"special", true}}}}};
  return j.dump();
}

TEST(TokenizerLoader, MissingDirectoryIsNotFound) {
  auto tok = LoadTokenizerFromDir("/nonexistent/pagellm");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kNotFound);
}

TEST(TokenizerLoader, MalformedJsonIsAnError) {
  TempDir dir;
  for (const char* text :
       {"{", "[]", "{\"model\": 3}", "{\"model\": {\"type\": \"BPE\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a\"]}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}}"}) {
    dir.Write("tokenizer.json", text);
    auto tok = LoadTokenizerFromDir(dir.path());
    EXPECT_FALSE(tok.ok()) << text;
  }
}

TEST(TokenizerLoader, ConfigDecidesBosEosAndTemplate) {
  TempDir dir;
  dir.Write("tokenizer.json", TinyByteLevelJson());
  dir.Write("tokenizer_config.json", R"({
    "add_bos_token": true, "bos_token": {"content": "<bos>"}, "eos_token": "<eos>",
    "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]
  })");
  dir.Write("generation_config.json", R"({"eos_token_id": [258, 97]})");
  auto tok = LoadTokenizerFromDir(dir.path());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->bos_id(), 257);
  EXPECT_EQ((*tok)->eos_id(), 258);
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_EQ((*tok)->chat_template(), "D");
  EXPECT_EQ((*tok)->stop_ids(), (std::vector<int32_t>{258, 97}));
  EXPECT_EQ((*tok)->Encode("ab a", true, false), (std::vector<int32_t>{257, 256, 32, 97}));
  EXPECT_EQ((*tok)->Decode(std::vector<int32_t>{257, 256, 32, 97, 258}, true), "ab a");
}

TEST(TokenizerLoader, TemplateProcessingAddsBos) {
  TempDir dir;
  dir.Write("tokenizer.json", TinyByteLevelJson(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}}],
      "special_tokens": {"<bos>": {"id": "<bos>", "ids": [257], "tokens": ["<bos>"]}}})"));
  dir.Write("config.json", R"({"eos_token_id": 258})");
  auto tok = LoadTokenizerFromDir(dir.path());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->bos_id(), 257);
  EXPECT_TRUE((*tok)->add_bos());
  EXPECT_EQ((*tok)->eos_id(), 258);
  EXPECT_EQ((*tok)->Encode("a", true, false), (std::vector<int32_t>{257, 97}));
}

}  // namespace
}  // namespace pagellm
