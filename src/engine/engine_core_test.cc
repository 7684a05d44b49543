// EngineCore over a scripted backend (no model file): the engine's scheduling, sampling, stop
// checks, finish reasons, aborts, prompt logprobs, speculative verification and KV accounting,
// checked against outputs worked out by hand from the script.
#include "engine/engine_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pagellm/check.h"

namespace pagellm {
namespace {

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

int32_t CountUp(int32_t token, int32_t pos) {
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

ModelConfig TinyModel() {
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

EngineConfig TinyEngineConfig() {
  EngineConfig c;
  c.threads = 2;
  c.block_size = kBlockSize;
  c.num_gpu_blocks_override = kNumBlocks;
  return c;
}

std::unique_ptr<EngineCore> MakeEngine(Script script, ScriptedBackend::Log* log,
                                       EngineConfig config = TinyEngineConfig()) {
  auto backend = std::make_unique<ScriptedBackend>(script, config.block_size, log);
  StatusOr<std::unique_ptr<EngineCore>> e = EngineCore::Create(
      config, TinyModel(), std::make_unique<CharTokenizer>(), std::move(backend));
  CHECK(e.ok()) << e.status().message();
  return std::move(*e);
}

EngineRequest Greedy(const std::string& id, std::vector<int32_t> prompt, int max_tokens) {
  EngineRequest r;
  r.request_id = id;
  r.prompt_token_ids = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  return r;
}

// The greedy continuation of `prompt` under `script`, up to max_tokens (no stop checks).
std::vector<int32_t> Expected(Script script, const std::vector<int32_t>& prompt, int max_tokens) {
  std::vector<int32_t> seq = prompt;
  for (int i = 0; i < max_tokens; ++i) {
    const int32_t pos = static_cast<int32_t>(seq.size()) - 1;
    seq.push_back(script(seq.back(), pos));
  }
  return std::vector<int32_t>(seq.begin() + static_cast<int64_t>(prompt.size()), seq.end());
}

std::string Text(const std::vector<int32_t>& ids) {
  return CharTokenizer().Decode(ids, /*skip_special=*/true);
}

// Everything one request produced over the steps.
struct Result {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenLogprobEntry> logprobs;
  std::vector<std::optional<TokenLogprobEntry>> prompt_logprobs;
  int num_outputs_with_prompt_logprobs = 0;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kStop;
  std::string stop_reason;
};

void Collect(const std::vector<EngineOutput>& outs, std::map<std::string, Result>& results) {
  for (const EngineOutput& o : outs) {
    Result& r = results[o.request_id];
    EXPECT_FALSE(r.finished) << o.request_id << ": output after its final one";
    r.tokens.insert(r.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    r.text += o.new_text;
    r.logprobs.insert(r.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
    if (!o.prompt_logprobs.empty()) {
      r.prompt_logprobs = o.prompt_logprobs;
      ++r.num_outputs_with_prompt_logprobs;
    }
    if (o.finished) {
      r.finished = true;
      r.finish_reason = o.finish_reason;
      r.stop_reason = o.stop_reason;
    }
  }
}

std::map<std::string, Result> RunToCompletion(EngineCore& e) {
  std::map<std::string, Result> results;
  for (int steps = 0; e.HasUnfinishedRequests(); ++steps) {
    CHECK_LT(steps, 1000) << "engine does not finish";
    StatusOr<std::vector<EngineOutput>> outs = e.Step();
    CHECK(outs.ok()) << outs.status().message();
    Collect(*outs, results);
  }
  return results;
}

// Every block is back in the free pool (cached prefix blocks count as free: evictable).
void ExpectNoBlocksHeld(const EngineCore& e) {
  const EngineStats s = e.stats();
  EXPECT_EQ(s.num_running + s.num_waiting + s.num_swapped, 0);
  EXPECT_EQ(s.num_free_blocks, s.num_usable_blocks);
  EXPECT_EQ(s.num_usable_blocks, kNumBlocks);
}

TEST(EngineCoreTest, GreedyOutputFollowsTheScriptedArgmax) {
  ScriptedBackend::Log log;
  auto e = MakeEngine(CountUp, &log);
  const std::vector<int32_t> prompt = {kBos, 7, 3, 12, 5};
  ASSERT_TRUE(e->AddRequest(Greedy("a", prompt, 9)).ok());
  std::map<std::string, Result> res = RunToCompletion(*e);
  const Result& a = res.at("a");
  const std::vector<int32_t> want = Expected(CountUp, prompt, 9);
  EXPECT_EQ(a.tokens, want);
  EXPECT_EQ(a.text, Text(want));
  EXPECT_TRUE(a.finished);
  EXPECT_EQ(a.finish_reason, FinishReason::kLength);
  EXPECT_STREQ(FinishReasonName(a.finish_reason), "length");
  EXPECT_EQ(a.stop_reason, "");
  EXPECT_EQ(log.num_forwards, 9);  // one prefill (with the first token), then one per token
  ExpectNoBlocksHeld(*e);
}

// Ends with EOS at position 9 (the 10th token), else counts up.
int32_t EosAtNine(int32_t token, int32_t pos) {
  return pos + 1 == 9 ? kEos : CountUp(token, pos);
}

TEST(EngineCoreTest, StopTokensStopStringsAndMaxTokens) {
  ScriptedBackend::Log log;
  auto e = MakeEngine(EosAtNine, &log);
  const std::vector<int32_t> prompt = {kBos, 2, 3, 4};  // positions 0..3
  // EOS: stop, no stop reason, EOS not in the text.
  ASSERT_TRUE(e->AddRequest(Greedy("eos", prompt, 20)).ok());
  // The same with ignore_eos runs to max_tokens.
  EngineRequest ignore = Greedy("ignore", prompt, 8);
  ignore.params.ignore_eos = true;
  ASSERT_TRUE(e->AddRequest(ignore).ok());
  // A stop token id: stop, the id as stop reason.
  const std::vector<int32_t> want = Expected(EosAtNine, prompt, 5);
  EngineRequest tok = Greedy("tok", prompt, 20);
  tok.params.stop_token_ids = {want[2]};
  ASSERT_TRUE(e->AddRequest(tok).ok());
  // A stop string spanning two tokens: the text is cut before it.
  EngineRequest str = Greedy("str", prompt, 20);
  str.params.stop = {Text({want[1], want[2]})};
  ASSERT_TRUE(e->AddRequest(str).ok());
  std::map<std::string, Result> res = RunToCompletion(*e);

  const std::vector<int32_t> to_eos = Expected(EosAtNine, prompt, 6);
  ASSERT_EQ(to_eos.back(), kEos);
  EXPECT_EQ(res.at("eos").tokens, to_eos);
  EXPECT_EQ(res.at("eos").text, Text(to_eos));
  EXPECT_EQ(res.at("eos").finish_reason, FinishReason::kStop);
  EXPECT_EQ(res.at("eos").stop_reason, "");

  EXPECT_EQ(res.at("ignore").tokens, Expected(EosAtNine, prompt, 8));
  EXPECT_EQ(res.at("ignore").finish_reason, FinishReason::kLength);

  EXPECT_EQ(res.at("tok").tokens, std::vector<int32_t>(want.begin(), want.begin() + 3));
  EXPECT_EQ(res.at("tok").text, Text({want[0], want[1]}));  // the stop token's text left out
  EXPECT_EQ(res.at("tok").finish_reason, FinishReason::kStop);
  EXPECT_EQ(res.at("tok").stop_reason, std::to_string(want[2]));

  EXPECT_EQ(res.at("str").tokens, std::vector<int32_t>(want.begin(), want.begin() + 3));
  EXPECT_EQ(res.at("str").text, Text({want[0]}));
  EXPECT_EQ(res.at("str").finish_reason, FinishReason::kStop);
  EXPECT_EQ(res.at("str").stop_reason, Text({want[1], want[2]}));
  ExpectNoBlocksHeld(*e);
}

TEST(EngineCoreTest, AbortFinishesOnlyThatRequest) {
  ScriptedBackend::Log log;
  auto e = MakeEngine(CountUp, &log);
  const std::vector<int32_t> prompt = {kBos, 9, 8, 7, 6, 5};
  ASSERT_TRUE(e->AddRequest(Greedy("keep", prompt, 6)).ok());
  ASSERT_TRUE(e->AddRequest(Greedy("drop", prompt, 6)).ok());
  std::map<std::string, Result> res;
  for (int i = 0; i < 2; ++i) Collect(*e->Step(), res);
  e->Abort("drop");
  e->Abort("unknown");  // ignored
  StatusOr<std::vector<EngineOutput>> outs = e->Step();
  ASSERT_TRUE(outs.ok());
  ASSERT_FALSE(outs->empty());
  // The abort's final output comes first, before anything the step computes.
  EXPECT_EQ(outs->front().request_id, "drop");
  EXPECT_TRUE(outs->front().finished);
  EXPECT_EQ(outs->front().finish_reason, FinishReason::kAbort);
  EXPECT_EQ(outs->front().num_prompt_tokens, static_cast<int32_t>(prompt.size()));
  EXPECT_TRUE(outs->front().new_token_ids.empty());
  Collect(*outs, res);
  for (const auto& [id, r] : RunToCompletion(*e)) {
    EXPECT_EQ(id, "keep");
    Result& k = res[id];
    k.tokens.insert(k.tokens.end(), r.tokens.begin(), r.tokens.end());
    k.finish_reason = r.finish_reason;
  }
  const std::vector<int32_t> want = Expected(CountUp, prompt, 6);
  EXPECT_EQ(res.at("keep").tokens, want);
  EXPECT_EQ(res.at("keep").finish_reason, FinishReason::kLength);
  EXPECT_EQ(res.at("drop").tokens, std::vector<int32_t>(want.begin(), want.begin() + 2));
  EXPECT_EQ(res.at("drop").finish_reason, FinishReason::kAbort);
  e->Abort("keep");  // already finished: ignored
  EXPECT_FALSE(e->HasUnfinishedRequests());
  ExpectNoBlocksHeld(*e);
}

TEST(EngineCoreTest, ContinuousBatchingMatchesSoloRuns) {
  ScriptedBackend::Log log;
  auto e = MakeEngine(CountUp, &log);
  struct Spec {
    std::string id;
    std::vector<int32_t> prompt;
    int max_tokens;
  };
  const std::vector<Spec> first = {{"r0", {kBos, 4, 4, 4, 4, 4, 4, 4, 4, 4}, 12},
                                   {"r1", {kBos, 20}, 3},
                                   {"r2", {kBos, 11, 13, 17}, 7}};
  const Spec late = {"r3", {kBos, 2, 30, 2, 30, 2}, 5};
  for (const Spec& s : first) ASSERT_TRUE(e->AddRequest(Greedy(s.id, s.prompt, s.max_tokens)).ok());
  std::map<std::string, Result> res;
  for (int i = 0; i < 2; ++i) Collect(*e->Step(), res);
  ASSERT_TRUE(e->AddRequest(Greedy(late.id, late.prompt, late.max_tokens)).ok());
  for (const auto& [id, r] : RunToCompletion(*e)) {
    Result& k = res[id];
    k.tokens.insert(k.tokens.end(), r.tokens.begin(), r.tokens.end());
    k.finished = r.finished;
    k.finish_reason = r.finish_reason;
  }
  std::vector<Spec> all = first;
  all.push_back(late);
  for (const Spec& s : all) {
    EXPECT_EQ(res.at(s.id).tokens, Expected(CountUp, s.prompt, s.max_tokens)) << s.id;
    EXPECT_TRUE(res.at(s.id).finished) << s.id;
    EXPECT_EQ(res.at(s.id).finish_reason, FinishReason::kLength) << s.id;
  }
  EXPECT_EQ(log.max_seqs, 4);       // the late request joined the running ones
  EXPECT_EQ(log.num_forwards, 12);  // r0's 12 tokens bound the run: one forward per token
  EXPECT_EQ(e->stats().num_preemptions, 0);
  ExpectNoBlocksHeld(*e);
}

TEST(EngineCoreTest, PromptLogprobsHaveOneEntryPerPromptToken) {
  ScriptedBackend::Log log;
  auto e = MakeEngine(CountUp, &log);
  const std::vector<int32_t> prompt = {kBos, 5, 6, 7, 8, 9, 10};
  EngineRequest r = Greedy("p", prompt, 4);
  r.params.prompt_logprobs = 3;
  r.params.logprobs = 2;
  ASSERT_TRUE(e->AddRequest(r).ok());
  std::map<std::string, Result> res = RunToCompletion(*e);
  const Result& p = res.at("p");
  EXPECT_EQ(p.num_outputs_with_prompt_logprobs, 1);  // delivered once
  ASSERT_EQ(p.prompt_logprobs.size(), prompt.size());
  EXPECT_FALSE(p.prompt_logprobs[0].has_value());  // nothing precedes the first token
  for (size_t i = 1; i < prompt.size(); ++i) {
    ASSERT_TRUE(p.prompt_logprobs[i].has_value()) << i;
    const TokenLogprobEntry& lp = *p.prompt_logprobs[i];
    EXPECT_EQ(lp.token_id, prompt[i]);
    EXPECT_EQ(lp.top.size(), 3u);
    // The top alternative is the scripted successor of the previous prompt token.
    EXPECT_EQ(lp.top.front().first, CountUp(prompt[i - 1], static_cast<int32_t>(i) - 1));
    EXPECT_LE(lp.logprob, lp.top.front().second);
  }
  const std::vector<int32_t> want = Expected(CountUp, prompt, 4);
  EXPECT_EQ(p.tokens, want);
  ASSERT_EQ(p.logprobs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(p.logprobs[i].token_id, want[i]);
    EXPECT_EQ(p.logprobs[i].top.size(), 2u);
    EXPECT_EQ(p.logprobs[i].top.front().first, want[i]);  // greedy: the top token
  }
  ExpectNoBlocksHeld(*e);
}

// Repeats "abcabc..." whatever the position: n-gram drafts get accepted.
int32_t Cycle(int32_t token, int32_t /*pos*/) {
  return token >= 2 && token < 4 ? token + 1 : 2;
}

TEST(EngineCoreTest, NgramSpeculationKeepsGreedyOutputs) {
  EngineConfig spec = TinyEngineConfig();
  spec.speculative.method = SpeculativeMethod::kNgram;
  spec.speculative.num_speculative_tokens = 3;
  spec.speculative.prompt_lookup_min = 2;
  spec.speculative.prompt_lookup_max = 3;
  spec.speculative.draft_policy = "fixed";
  const std::vector<int32_t> prompt = {kBos, 2, 3, 4, 2, 3, 4, 2};
  std::map<std::string, Result> plain, drafted;
  ScriptedBackend::Log plain_log, spec_log;
  for (auto* run : {&plain, &drafted}) {
    auto e = run == &plain ? MakeEngine(Cycle, &plain_log) : MakeEngine(Cycle, &spec_log, spec);
    ASSERT_TRUE(e->AddRequest(Greedy("a", prompt, 12)).ok());
    EngineRequest stop = Greedy("b", prompt, 12);
    stop.params.stop = {"cab"};
    ASSERT_TRUE(e->AddRequest(stop).ok());
    *run = RunToCompletion(*e);
    if (run == &drafted) {
      EXPECT_GT(e->stats().spec_decode.num_accepted_tokens, 0);
      EXPECT_EQ(e->stats().num_speculative_tokens, 3);
    }
    ExpectNoBlocksHeld(*e);
  }
  EXPECT_EQ(plain.at("a").tokens, Expected(Cycle, prompt, 12));
  for (const std::string id : {"a", "b"}) {
    EXPECT_EQ(drafted.at(id).tokens, plain.at(id).tokens) << id;
    EXPECT_EQ(drafted.at(id).text, plain.at(id).text) << id;
    EXPECT_EQ(drafted.at(id).finish_reason, plain.at(id).finish_reason) << id;
    EXPECT_EQ(drafted.at(id).stop_reason, plain.at(id).stop_reason) << id;
  }
  EXPECT_EQ(plain.at("b").finish_reason, FinishReason::kStop);
  EXPECT_LT(spec_log.num_forwards, plain_log.num_forwards);  // accepted drafts save steps
}

}  // namespace
}  // namespace pagellm
