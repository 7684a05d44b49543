// LoadTokenizerFromGguf: builds a tokenizer from GGUF tokenizer.ggml.* metadata, following
// llama.cpp's conventions for defaults (add_bos, add_space_prefix, pre-tokenizer names).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "model/gguf_file.h"
#include "tokenizer/byte_level_bpe_tokenizer.h"
#include "tokenizer/spm_bpe_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {
namespace {

constexpr size_t kMaxVocabSize = 1 << 24;

// Control tokens that end a chat turn. GGUF files often name only <|endoftext|>-style EOS,
// while chat models stop on these; llama.cpp detects them by name the same way.
constexpr std::string_view kEndOfTurnTokens[] = {"<|eot_id|>", "<|im_end|>", "<|end|>",
                                                 "<end_of_turn>", "<|eom_id|>"};

StatusOr<std::optional<int64_t>> OptionalInt(const GgufFile& gguf, std::string_view key) {
  if (gguf.Find(key) == nullptr) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(int64_t v, gguf.GetInt(key));
  return std::optional<int64_t>(v);
}

StatusOr<std::optional<bool>> OptionalBool(const GgufFile& gguf, std::string_view key) {
  if (gguf.Find(key) == nullptr) return std::optional<bool>();
  ASSIGN_OR_RETURN(bool v, gguf.GetBool(key));
  return std::optional<bool>(v);
}

TokenKind KindFromGguf(int64_t type) {
  return type >= 1 && type <= 6 ? static_cast<TokenKind>(type) : TokenKind::kNormal;
}

// The pre-tokenizer regex named by tokenizer.ggml.pre; whether it is Llama-3's, which also
// means ignore_merges and a BOS by default.
std::string_view PrePattern(const std::string& pre, bool* llama3) {
  *llama3 = false;
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    *llama3 = true;
    return kLlama3Pattern;
  }
  if (pre == "qwen2") return kQwen2Pattern;
  if (pre != "default" && pre != "gpt2" && pre != "gpt-2") {
    spdlog::warn("GGUF tokenizer.ggml.pre \"{}\" is not supported; using the GPT-2 pattern", pre);
  }
  return kGpt2Pattern;
}

StatusOr<std::unique_ptr<BaseTokenizer>> BuildSpm(const GgufFile& gguf, Vocab vocab) {
  std::vector<float> scores(vocab.size(), 0.0f);
  if (const GgufValue* v = gguf.Find("tokenizer.ggml.scores")) {
    if (v->type != GgufType::kArray || v->floats.size() != static_cast<size_t>(vocab.size())) {
      return DataLossError(gguf.name() + ": tokenizer.ggml.scores does not match the tokens");
    }
    scores = v->floats;
  }
  SpmBpeTokenizer::Options options;
  ASSIGN_OR_RETURN(auto space_prefix, OptionalBool(gguf, "tokenizer.ggml.add_space_prefix"));
  options.add_dummy_prefix = space_prefix.value_or(true);
  BpeMergeTable merges = SpmBpeTokenizer::MergesFromScores(vocab, scores);
  auto tok = std::make_unique<SpmBpeTokenizer>(std::move(vocab), std::move(merges), options);
  tok->set_add_bos(true);
  return std::unique_ptr<BaseTokenizer>(std::move(tok));
}

StatusOr<std::unique_ptr<BaseTokenizer>> BuildGpt2(const GgufFile& gguf, Vocab vocab) {
  const GgufValue* merges_value = gguf.Find("tokenizer.ggml.merges");
  if (merges_value == nullptr || merges_value->type != GgufType::kArray ||
      merges_value->array_type != GgufType::kString) {
    return DataLossError(gguf.name() + ": tokenizer.ggml.merges missing");
  }
  BpeMergeTable merges;
  merges.Reserve(merges_value->strings.size());
  int32_t rank = 0;
  for (std::string_view m : merges_value->strings) {
    const size_t space = m.find(' ', 1);
    if (space == std::string_view::npos ||
        !AddMerge(vocab, m.substr(0, space), m.substr(space + 1), rank, &merges)) {
      return DataLossError(gguf.name() + ": bad merge \"" + std::string(m) + "\"");
    }
    ++rank;
  }
  std::string pre = "default";
  if (gguf.Find("tokenizer.ggml.pre") != nullptr) {
    ASSIGN_OR_RETURN(pre, gguf.GetString("tokenizer.ggml.pre"));
  }
  bool llama3 = false;
  const std::string_view pattern = PrePattern(pre, &llama3);
  std::vector<std::unique_ptr<RegexSplitter>> stages;
  ASSIGN_OR_RETURN(auto stage, RegexSplitter::Create(pattern));
  stages.push_back(std::move(stage));
  ByteLevelBpeTokenizer::Options options;
  options.ignore_merges = llama3;
  ASSIGN_OR_RETURN(auto tok, ByteLevelBpeTokenizer::Create(std::move(vocab), std::move(merges),
                                                           std::move(stages), options));
  tok->set_add_bos(llama3);
  return std::unique_ptr<BaseTokenizer>(std::move(tok));
}

StatusOr<std::unique_ptr<Tokenizer>> Load(const GgufFile& gguf) {
  ASSIGN_OR_RETURN(const std::string model, gguf.GetString("tokenizer.ggml.model"));
  const GgufValue* tokens = gguf.Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufType::kArray ||
      tokens->array_type != GgufType::kString || tokens->strings.empty() ||
      tokens->strings.size() > kMaxVocabSize) {
    return DataLossError("tokenizer.ggml.tokens missing or not a list of strings");
  }
  const size_t n = tokens->strings.size();
  const GgufValue* types = gguf.Find("tokenizer.ggml.token_type");
  if (types != nullptr && (types->type != GgufType::kArray || types->ints.size() != n)) {
    return DataLossError("tokenizer.ggml.token_type does not match the tokens");
  }
  Vocab vocab;
  vocab.Reserve(n);
  for (size_t i = 0; i < n; ++i) {
    vocab.Set(static_cast<int32_t>(i), std::string(tokens->strings[i]),
              types != nullptr ? KindFromGguf(types->ints[i]) : TokenKind::kNormal);
  }

  std::unique_ptr<BaseTokenizer> tok;
  if (model == "llama") {
    ASSIGN_OR_RETURN(tok, BuildSpm(gguf, std::move(vocab)));
  } else if (model == "gpt2") {
    ASSIGN_OR_RETURN(tok, BuildGpt2(gguf, std::move(vocab)));
  } else {
    return UnimplementedError("tokenizer.ggml.model \"" + model + "\"");
  }
  // Control and unknown tokens are matched with parse_special, user-defined ones always.
  std::vector<int32_t> stop_ids;
  for (int32_t id = 0; id < tok->vocab_size(); ++id) {
    const TokenKind kind = tok->vocab().kind(id);
    if (kind != TokenKind::kControl && kind != TokenKind::kUnknown &&
        kind != TokenKind::kUserDefined) {
      continue;
    }
    const std::string piece = tok->IdToPiece(id);
    if (piece.empty()) continue;
    RETURN_IF_ERROR(tok->AddToken(id, piece, kind != TokenKind::kUserDefined));
  }

  auto valid = [&](std::optional<int64_t> id) { return id && *id >= 0 && *id < tok->vocab_size(); };
  ASSIGN_OR_RETURN(auto bos, OptionalInt(gguf, "tokenizer.ggml.bos_token_id"));
  ASSIGN_OR_RETURN(auto eos, OptionalInt(gguf, "tokenizer.ggml.eos_token_id"));
  ASSIGN_OR_RETURN(auto eot, OptionalInt(gguf, "tokenizer.ggml.eot_token_id"));
  ASSIGN_OR_RETURN(auto eom, OptionalInt(gguf, "tokenizer.ggml.eom_token_id"));
  ASSIGN_OR_RETURN(auto add_bos, OptionalBool(gguf, "tokenizer.ggml.add_bos_token"));
  ASSIGN_OR_RETURN(auto add_eos, OptionalBool(gguf, "tokenizer.ggml.add_eos_token"));
  tok->set_bos_id(valid(bos) ? static_cast<int32_t>(*bos) : -1);
  tok->set_eos_id(valid(eos) ? static_cast<int32_t>(*eos) : -1);
  if (add_bos) tok->set_add_bos(*add_bos);
  tok->set_add_eos(add_eos.value_or(false));
  for (const auto& id : {eos, eot, eom}) {
    if (valid(id)) stop_ids.push_back(static_cast<int32_t>(*id));
  }
  for (std::string_view name : kEndOfTurnTokens) {
    const auto id = tok->PieceToId(name);
    if (id && tok->IsSpecial(*id)) stop_ids.push_back(*id);
  }
  std::vector<int32_t> unique;
  for (int32_t id : stop_ids) {
    if (std::find(unique.begin(), unique.end(), id) == unique.end()) unique.push_back(id);
  }
  tok->set_stop_ids(std::move(unique));
  if (gguf.Find("tokenizer.chat_template") != nullptr) {
    ASSIGN_OR_RETURN(std::string chat_template, gguf.GetString("tokenizer.chat_template"));
    tok->set_chat_template(std::move(chat_template));
  }
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromGguf(const GgufFile& gguf) {
  auto result = Load(gguf);
  if (!result.ok()) return result.status().WithContext(gguf.name() + ": tokenizer");
  return result;
}

}  // namespace pagellm
