// Test fixtures shared by the engine's tests: a one-character-per-token tokenizer, a scripted
// backend whose logits make a fixed function of (token, position) the argmax, a tiny model
// config and the engine built over them, so that the expected output of any request is known
// without a model file and does not depend on what shares its batch. Test-only (gtest).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_core.h"
#include "pagellm/check.h"

namespace pagellm {
namespace engine_testing {

constexpr int32_t kVocab = 32;
constexpr int32_t kBos = 0;
constexpr int32_t kEos = 1;
// Ids 2..31 spell one character each.
constexpr std::string_view kChars = "abcdefghijklmnopqrstuvwxyz .,!";

// One character per token; ids 0 and 1 are the special BOS and EOS.
class CharTokenizer : public Tokenizer {
 public:
  CharTokenizer() {
    set_bos_id(kBos);
    set_eos_id(kEos);
    set_stop_ids({kEos});
  }
  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool /*parse_special*/) const override {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(kBos);
    for (char c : text) {
      const size_t i = kChars.find(c);
      CHECK(i != std::string_view::npos) << "no token for '" << c << "'";
      ids.push_back(static_cast<int32_t>(i) + 2);
    }
    return ids;
  }
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const override {
    std::string text;
    for (int32_t id : ids)
      if (!(skip_special && IsSpecial(id))) text += IdToPiece(id);
    return text;
  }
  int32_t vocab_size() const override { return kVocab; }
  std::optional<std::string> TokenBytes(int32_t id) const override {
    if (id < 2 || id >= kVocab) return std::nullopt;
    return std::string(1, kChars[id - 2]);
  }
  std::string IdToPiece(int32_t id) const override {
    if (id == kBos) return "<s>";
    if (id == kEos) return "</s>";
    return std::string(1, kChars[id - 2]);
  }
  std::optional<int32_t> PieceToId(std::string_view piece) const override {
    for (int32_t id = 0; id < kVocab; ++id)
      if (IdToPiece(id) == piece) return id;
    return std::nullopt;
  }
  bool IsSpecial(int32_t id) const override { return id == kBos || id == kEos; }
};

// The script: the token that follows `token` at position `pos`. A pure function of the fed
// token and its position, so the expected output of any request is known without the engine
// and does not depend on what shares its batch.
using Script = int32_t (*)(int32_t token, int32_t pos);

inline int32_t CountUp(int32_t token, int32_t pos) {
  return 2 + (token + pos) % (kVocab - 2);  // never a special token
}

// Logits of a row: 0 at the scripted token, -(distance) elsewhere, so the argmax is the
// scripted token and logprobs are well defined.
class ScriptedBackend : public Backend {
 public:
  struct Log {
    int32_t num_forwards = 0;
    int32_t max_seqs = 0;  // most sequences in one forward
  };
  ScriptedBackend(Script script, int32_t block_size, Log* log)
      : script_(script), block_size_(block_size), log_(log) {}

  // The KV pools are real host storage (the engine keys its prefix cache by their shape), but
  // the script never reads them.
  Status AllocateKvCache(const KvCacheShape& shape, int32_t num_swap_blocks) override {
    EXPECT_EQ(shape.block_size, block_size_);
    ASSIGN_OR_RETURN(kv_, KvCacheStorage::Create(shape));
    if (num_swap_blocks > 0) {
      KvCacheShape swap = shape;
      swap.num_blocks = num_swap_blocks;
      ASSIGN_OR_RETURN(swap_kv_, KvCacheStorage::Create(swap));
    }
    return Status::Ok();
  }
  KvCacheStorage& kv_cache() override { return kv_; }
  void CopyKvBlocks(KvPool src, KvPool dst, std::span<const BlockCopy> copies) override {
    KvCacheStorage& from = src == KvPool::kPrimary ? kv_ : swap_kv_;
    KvCacheStorage& to = dst == KvPool::kPrimary ? kv_ : swap_kv_;
    for (const BlockCopy& c : copies) to.CopyBlockFrom(from, c.src, c.dst);
  }
  void PoisonKvCache() override {
    kv_.PoisonWithNaN();
    swap_kv_.PoisonWithNaN();
  }

  Status Forward(const ForwardBatch& batch, ForwardOutput* out) override {
    ++log_->num_forwards;
    log_->max_seqs = std::max(log_->max_seqs, static_cast<int32_t>(batch.seqs.size()));
    out->vocab_size = kVocab;
    out->logits.clear();
    out->row_offset.clear();
    size_t t = 0;
    int32_t rows = 0;
    for (const SequenceChunk& s : batch.seqs) {
      // The block table covers every position the chunk writes, with real (non-null) blocks.
      const int32_t end = s.start_pos + s.num_tokens;
      EXPECT_GE(static_cast<int64_t>(s.block_table.size()) * block_size_, end);
      for (int32_t b = 0; b < (end + block_size_ - 1) / block_size_; ++b)
        EXPECT_GT(s.block_table[b], 0);
      out->row_offset.push_back(rows);
      for (int32_t j = 0; j < s.num_tokens; ++j, ++t) {
        if (!s.all_logits && j + 1 < s.num_tokens) continue;
        const int32_t next = script_(batch.token_ids[t], s.start_pos + j);
        for (int32_t v = 0; v < kVocab; ++v)
          out->logits.push_back(-static_cast<float>((v - next + kVocab) % kVocab));
        ++rows;
      }
    }
    EXPECT_EQ(t, batch.token_ids.size());
    return Status::Ok();
  }

 private:
  Script script_;
  int32_t block_size_;
  Log* log_;
  KvCacheStorage kv_;
  KvCacheStorage swap_kv_;
};

inline ModelConfig TinyModel() {
  ModelConfig mc;
  mc.hidden_size = 8;
  mc.intermediate_size = 16;
  mc.num_layers = 1;
  mc.num_heads = 1;
  mc.num_kv_heads = 1;
  mc.head_dim = 8;
  mc.vocab_size = kVocab;
  mc.max_position_embeddings = 64;
  mc.bos_token_id = kBos;
  mc.eos_token_ids = {kEos};
  return mc;
}

constexpr int32_t kBlockSize = 4;
constexpr int32_t kNumBlocks = 32;

inline EngineConfig TinyEngineConfig() {
  EngineConfig c;
  c.threads = 2;
  c.block_size = kBlockSize;
  c.num_gpu_blocks_override = kNumBlocks;
  return c;
}

inline std::unique_ptr<EngineCore> MakeEngine(Script script, ScriptedBackend::Log* log,
                                              EngineConfig config = TinyEngineConfig()) {
  auto backend = std::make_unique<ScriptedBackend>(script, config.block_size, log);
  StatusOr<std::unique_ptr<EngineCore>> e = EngineCore::Create(
      config, TinyModel(), std::make_unique<CharTokenizer>(), std::move(backend));
  CHECK(e.ok()) << e.status().message();
  return std::move(*e);
}

inline EngineRequest Greedy(const std::string& id, std::vector<int32_t> prompt, int max_tokens) {
  EngineRequest r;
  r.request_id = id;
  r.prompt_token_ids = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  return r;
}

// The greedy continuation of `prompt` under `script`, up to max_tokens (no stop checks).
inline std::vector<int32_t> Expected(Script script, const std::vector<int32_t>& prompt,
                                     int max_tokens) {
  std::vector<int32_t> seq = prompt;
  for (int i = 0; i < max_tokens; ++i) {
    const int32_t pos = static_cast<int32_t>(seq.size()) - 1;
    seq.push_back(script(seq.back(), pos));
  }
  return std::vector<int32_t>(seq.begin() + static_cast<int64_t>(prompt.size()), seq.end());
}

}  // namespace engine_testing
}  // namespace pagellm
