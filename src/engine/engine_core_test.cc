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

#include "engine/engine_test_fixtures.h"
#include "pagellm/check.h"

namespace pagellm {
namespace {

using namespace engine_testing;  // NOLINT: the fixtures are this test's vocabulary

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
