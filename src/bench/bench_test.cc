// Tests of the benchmark helpers: statistics, arrivals, SSE and chunk parsing, datasets, metrics.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "bench/arrivals.h"
#include "bench/datasets.h"
#include "bench/protocol.h"
#include "bench/serve_metrics.h"
#include "bench/sse.h"
#include "bench/stats.h"
#include "gtest/gtest.h"

namespace pagellm::bench {
namespace {

// ---- statistics (NumPy's definitions) ----

TEST(StatsTest, PercentileInterpolatesLinearlyLikeNumpy) {
  const std::vector<double> v = {15, 20, 35, 40, 50};
  // np.percentile([15, 20, 35, 40, 50], q) for q = 0, 25, 40, 50, 99, 100
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 15);
  EXPECT_DOUBLE_EQ(Percentile(v, 25), 20);
  EXPECT_DOUBLE_EQ(Percentile(v, 40), 29);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 35);
  EXPECT_NEAR(Percentile(v, 99), 49.6, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 50);
}

TEST(StatsTest, PercentileSortsAndHandlesSmallSamples) {
  EXPECT_DOUBLE_EQ(Percentile({}, 99), 0);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_NEAR(Percentile({10, 0}, 99), 9.9, 1e-12);
}

TEST(StatsTest, MeanMedianStd) {
  const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(Mean(v), 5);
  EXPECT_DOUBLE_EQ(Median(v), 4.5);
  EXPECT_DOUBLE_EQ(StdDev(v), 2);  // population std (ddof = 0)
  EXPECT_DOUBLE_EQ(Mean({}), 0);
  EXPECT_DOUBLE_EQ(StdDev({}), 0);
  Summary s = Summarize(v, {50, 90});
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_DOUBLE_EQ(s.percentiles.at(50), 4.5);
  EXPECT_NEAR(s.percentiles.at(90), 7.6, 1e-12);
}

// ---- arrivals ----

TEST(ArrivalsTest, InfiniteRateSendsAllAtOnce) {
  auto t = ArrivalTimes(5, std::numeric_limits<double>::infinity(), 1.0, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, std::vector<double>(5, 0.0));
}

TEST(ArrivalsTest, PoissonGapsHaveMeanOneOverRateAndAreSeeded) {
  const int n = 20001;
  const double rate = 8.0;
  auto a = ArrivalTimes(n, rate, 1.0, 42);
  auto b = ArrivalTimes(n, rate, 1.0, 42);
  auto c = ArrivalTimes(n, rate, 1.0, 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  EXPECT_EQ((*a)[0], 0.0);
  std::vector<double> gaps;
  for (int i = 1; i < n; ++i) {
    ASSERT_GE((*a)[i], (*a)[i - 1]);
    gaps.push_back((*a)[i] - (*a)[i - 1]);
  }
  // Exponential gaps: mean 1/rate and standard deviation 1/rate. With 20,000 gaps the
  // sample mean is within 3 standard errors (3 * 0.125 / sqrt(20000) = 0.0027 s) of 0.125 s.
  EXPECT_NEAR(Mean(gaps), 1.0 / rate, 0.003);
  EXPECT_NEAR(StdDev(gaps), 1.0 / rate, 0.006);
  // Median of an exponential: ln 2 / rate.
  EXPECT_NEAR(Median(gaps), std::log(2.0) / rate, 0.004);
}

TEST(ArrivalsTest, BurstinessKeepsTheMeanAndChangesTheSpread) {
  auto regular = ArrivalTimes(20001, 4.0, 4.0, 1);  // gamma shape 4: cv = 1/2
  ASSERT_TRUE(regular.ok());
  std::vector<double> gaps;
  for (size_t i = 1; i < regular->size(); ++i) gaps.push_back((*regular)[i] - (*regular)[i - 1]);
  EXPECT_NEAR(Mean(gaps), 0.25, 0.004);
  EXPECT_NEAR(StdDev(gaps), 0.125, 0.004);
}

TEST(ArrivalsTest, RejectsBadArguments) {
  EXPECT_FALSE(ArrivalTimes(3, 0, 1, 0).ok());
  EXPECT_FALSE(ArrivalTimes(3, -1, 1, 0).ok());
  EXPECT_FALSE(ArrivalTimes(3, 1, 0, 0).ok());
}

// ---- SSE ----

std::vector<SseEvent> FeedAll(const std::vector<std::string>& pieces, bool finish = true) {
  SseParser p;
  std::vector<SseEvent> events;
  auto cb = [&](const SseEvent& e) { events.push_back(e); };
  for (const std::string& s : pieces) p.Feed(s, cb);
  if (finish) p.Finish(cb);
  return events;
}

TEST(SseTest, ParsesDataLinesAndDone) {
  auto ev = FeedAll({"data: {\"a\":1}\n\ndata: [DONE]\n\n"});
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].data, "{\"a\":1}");
  EXPECT_EQ(ev[1].data, "[DONE]");
}

TEST(SseTest, HandlesEventsSplitAnywhereAndAllLineEndings) {
  const std::string stream =
      "data: one\r\n\r\n: keep-alive comment\n\ndata:two\r\rdata: three\ndata: four\n\n"
      "event: ping\ndata: five\n\n";
  // Every split point, including between '\r' and '\n'.
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    auto ev = FeedAll({stream.substr(0, cut), stream.substr(cut)});
    ASSERT_EQ(ev.size(), 4u) << "cut at " << cut;
    EXPECT_EQ(ev[0].data, "one");
    EXPECT_EQ(ev[1].data, "two");
    EXPECT_EQ(ev[2].data, "three\nfour");
    EXPECT_EQ(ev[3].event, "ping");
    EXPECT_EQ(ev[3].data, "five");
  }
  // Byte by byte.
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  EXPECT_EQ(FeedAll(bytes).size(), 4u);
}

TEST(SseTest, EventWithoutBlankLineIsDispatchedOnlyAtFinish) {
  EXPECT_TRUE(FeedAll({"data: x\n"}, /*finish=*/false).empty());
  auto ev = FeedAll({"data: x"});
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].data, "x");
}

TEST(SseTest, LlamaCppErrorField) {
  auto ev = FeedAll({"error: {\"code\":500,\"message\":\"boom\"}\n\n"});
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].event, "error");
  EXPECT_EQ(ev[0].data, "{\"code\":500,\"message\":\"boom\"}");
}

TEST(StreamChunkTest, CompletionChatUsageDoneAndErrors) {
  StreamChunk c = ParseStreamChunk(R"({"choices":[{"index":0,"text":" hi","finish_reason":null}]})",
                                   /*chat=*/false);
  EXPECT_TRUE(c.has_choice);
  EXPECT_EQ(c.text, " hi");
  EXPECT_TRUE(c.error.empty());

  c = ParseStreamChunk(R"({"choices":[{"delta":{"role":"assistant"}}]})", /*chat=*/true);
  EXPECT_TRUE(c.has_choice);
  EXPECT_EQ(c.text, "");
  c = ParseStreamChunk(R"({"choices":[{"delta":{"content":"yo"},"finish_reason":"length"}]})",
                       true);
  EXPECT_EQ(c.text, "yo");
  EXPECT_EQ(c.finish_reason, "length");

  c = ParseStreamChunk(R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34}})",
                       false);
  EXPECT_FALSE(c.has_choice);
  EXPECT_EQ(c.prompt_tokens, 12);
  EXPECT_EQ(c.completion_tokens, 34);

  EXPECT_TRUE(ParseStreamChunk("[DONE]", false).done);
  EXPECT_EQ(ParseStreamChunk(R"({"error":{"message":"bad","code":400}})", false).error, "bad");
  EXPECT_FALSE(ParseStreamChunk("{not json", false).error.empty());
}

TEST(PayloadTest, CompletionPayloadStreamsWithUsageAndMergesExtraBody) {
  CompletionSettings s;
  s.model = "m";
  s.extra_body = {{"cache_prompt", true}, {"temperature", 0.5}};
  nlohmann::json p = BuildCompletionPayload(s, std::vector<int32_t>{1, 2, 3}, 16);
  EXPECT_EQ(p["model"], "m");
  EXPECT_EQ(p["prompt"], nlohmann::json({1, 2, 3}));
  EXPECT_EQ(p["max_tokens"], 16);
  EXPECT_EQ(p["stream"], true);
  EXPECT_EQ(p["stream_options"]["include_usage"], true);
  EXPECT_EQ(p["ignore_eos"], true);
  EXPECT_EQ(p["cache_prompt"], true);
  EXPECT_EQ(p["temperature"], 0.5);  // extra body wins
  nlohmann::json chat = BuildChatPayload(s, nlohmann::json::array(), 4);
  EXPECT_TRUE(chat.contains("messages"));
  EXPECT_FALSE(chat.contains("prompt"));
}

TEST(HttpTest, ParseBaseUrl) {
  auto t = ParseBaseUrl("http://127.0.0.1:8000");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->origin, "http://127.0.0.1:8000");
  EXPECT_EQ(t->path_prefix, "");
  t = ParseBaseUrl("https://example.com/proxy/");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->origin, "https://example.com");
  EXPECT_EQ(t->path_prefix, "/proxy");
  EXPECT_FALSE(ParseBaseUrl("127.0.0.1:8000").ok());
  EXPECT_FALSE(ParseBaseUrl("ftp://x").ok());
  EXPECT_FALSE(ParseBaseUrl("http://").ok());
}

// ---- datasets ----

std::vector<int32_t> Pool(int n, int first = 3) {
  std::vector<int32_t> pool;
  for (int i = first; i < first + n; ++i) pool.push_back(i);
  return pool;
}

TEST(DatasetTest, SampleLengthsFixedAndRanged) {
  std::mt19937_64 rng(1);
  auto fixed = SampleLengths(50, 128, 0.0, 1, rng);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(*fixed, std::vector<int>(50, 128));
  auto ranged = SampleLengths(5000, 100, 0.25, 1, rng);
  ASSERT_TRUE(ranged.ok());
  std::set<int> seen(ranged->begin(), ranged->end());
  EXPECT_EQ(*seen.begin(), 75);
  EXPECT_EQ(*seen.rbegin(), 125);
  EXPECT_EQ(seen.size(), 51u);  // every integer of [75, 125] occurs
  EXPECT_FALSE(SampleLengths(1, 10, 1.0, 1, rng).ok());
  EXPECT_FALSE(SampleLengths(1, 0, 0.0, 1, rng).ok());
}

TEST(DatasetTest, RandomDatasetIsSeededAndUsesOnlyPoolIds) {
  RandomDatasetOptions o{.num_prompts = 20, .input_len = 32, .output_len = 8, .seed = 7};
  const std::vector<int32_t> pool = Pool(100);
  auto a = BuildRandomDataset(o, pool);
  auto b = BuildRandomDataset(o, pool);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 20u);
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].ids, (*b)[i].ids);
    EXPECT_EQ((*a)[i].ids.size(), 32u);
    EXPECT_EQ((*a)[i].output_len, 8);
    for (int32_t id : (*a)[i].ids) EXPECT_TRUE(id >= 3 && id < 103);
  }
  o.seed = 8;
  auto c = BuildRandomDataset(o, pool);
  ASSERT_TRUE(c.ok());
  EXPECT_NE((*a)[0].ids, (*c)[0].ids);
  EXPECT_FALSE(BuildRandomDataset(o, {}).ok());
}

TEST(DatasetTest, OutputRangeRatioSetsTheOutputSpreadAlone) {
  // Issue 22's serving workload: prompts of 64-2048 tokens, outputs of 16-256.
  RandomDatasetOptions o{.num_prompts = 4000,
                         .input_len = 1056,
                         .output_len = 136,
                         .range_ratio = 0.93939,
                         .output_range_ratio = 0.88235,
                         .seed = 7};
  auto prompts = BuildRandomDataset(o, Pool(100));
  ASSERT_TRUE(prompts.ok());
  int in_lo = 1 << 30, in_hi = 0, out_lo = 1 << 30, out_hi = 0;
  for (const TokenPrompt& p : *prompts) {
    in_lo = std::min(in_lo, static_cast<int>(p.ids.size()));
    in_hi = std::max(in_hi, static_cast<int>(p.ids.size()));
    out_lo = std::min(out_lo, p.output_len);
    out_hi = std::max(out_hi, p.output_len);
  }
  EXPECT_EQ(in_lo, 64);
  EXPECT_EQ(in_hi, 2048);
  EXPECT_EQ(out_lo, 16);
  EXPECT_EQ(out_hi, 256);
  // Unset, the output ratio follows --range-ratio.
  o.output_range_ratio = -1;
  o.range_ratio = 0.5;
  prompts = BuildRandomDataset(o, Pool(100));
  ASSERT_TRUE(prompts.ok());
  out_lo = 1 << 30;
  for (const TokenPrompt& p : *prompts) out_lo = std::min(out_lo, p.output_len);
  EXPECT_EQ(out_lo, 68);
}

TEST(DatasetTest, PrefixSharingGroupsShareExactPrefixesAndSuffixesAreUnique) {
  PrefixSharingOptions o{.num_prompts = 50,
                         .num_prefixes = 4,
                         .prefix_len = 64,
                         .suffix_len = 5,
                         .output_len = 32,
                         .seed = 3};
  auto prompts = BuildPrefixSharingDataset(o, Pool(1000));
  ASSERT_TRUE(prompts.ok());
  ASSERT_EQ(prompts->size(), 50u);
  std::map<int, std::vector<int32_t>> prefix_of_group;
  std::map<int, int> group_sizes;
  std::set<std::vector<int32_t>> suffixes;
  std::vector<int> order;
  for (const TokenPrompt& p : *prompts) {
    ASSERT_EQ(p.ids.size(), 69u);
    ASSERT_GE(p.group, 0);
    ASSERT_LT(p.group, 4);
    EXPECT_EQ(p.output_len, 32);
    std::vector<int32_t> prefix(p.ids.begin(), p.ids.begin() + 64);
    auto [it, inserted] = prefix_of_group.emplace(p.group, prefix);
    EXPECT_EQ(it->second, prefix) << "group " << p.group << " has two different prefixes";
    ++group_sizes[p.group];
    EXPECT_TRUE(suffixes.insert(std::vector<int32_t>(p.ids.begin() + 64, p.ids.end())).second)
        << "duplicate suffix";
    order.push_back(p.group);
  }
  ASSERT_EQ(prefix_of_group.size(), 4u);
  // Groups differ from their very first token (no shared KV block across groups).
  std::set<int32_t> firsts;
  for (const auto& [g, prefix] : prefix_of_group) firsts.insert(prefix[0]);
  EXPECT_EQ(firsts.size(), 4u);
  // Balanced groups (50 = 13 + 13 + 12 + 12), shuffled rather than in round-robin order.
  for (const auto& [g, n] : group_sizes) EXPECT_TRUE(n == 12 || n == 13);
  bool round_robin = true;
  for (size_t i = 0; i < order.size(); ++i) round_robin &= order[i] == static_cast<int>(i % 4);
  EXPECT_FALSE(round_robin);
}

TEST(DatasetTest, PrefixSharingRejectsImpossibleUniqueness) {
  // 2 pool ids, suffix of 1 token: at most 2 unique suffixes.
  PrefixSharingOptions o{.num_prompts = 3,
                         .num_prefixes = 1,
                         .prefix_len = 4,
                         .suffix_len = 1,
                         .output_len = 1,
                         .seed = 0};
  EXPECT_FALSE(BuildPrefixSharingDataset(o, Pool(2)).ok());
  o.suffix_len = 0;
  EXPECT_FALSE(BuildPrefixSharingDataset(o, Pool(100)).ok());
}

// Whitespace-separated words <-> ids, for the text datasets.
class WordTokenizer : public TextTokenizer {
 public:
  StatusOr<std::vector<int32_t>> Encode(const std::string& text) override {
    std::vector<int32_t> ids;
    std::istringstream in(text);
    std::string word;
    while (in >> word) {
      auto [it, inserted] = ids_.emplace(word, static_cast<int32_t>(words_.size()));
      if (inserted) words_.push_back(word);
      ids.push_back(it->second);
    }
    ++encode_calls;
    return ids;
  }
  StatusOr<std::string> Decode(const std::vector<int32_t>& ids) override {
    std::string s;
    for (int32_t id : ids) s += (s.empty() ? "" : " ") + words_[static_cast<size_t>(id)];
    return s;
  }
  int encode_calls = 0;

 private:
  std::map<std::string, int32_t> ids_;
  std::vector<std::string> words_;
};

TEST(DatasetTest, SplitStories) {
  auto s = SplitStories("  one two \n<|endoftext|>\n\nthree<|endoftext|>  <|endoftext|>four");
  EXPECT_EQ(s, (std::vector<std::string>{"one two", "three", "four"}));
}

TEST(DatasetTest, TextPromptsHaveExactTokenCountsAndTokenizeStoriesOnce) {
  WordTokenizer tok;
  TextPromptSource source({"a b c d e", "f g h", "i j k l m n o"}, &tok);
  TextDatasetOptions o{.num_prompts = 30, .input_len = 20, .output_len = 4, .seed = 5};
  auto prompts = BuildTextDataset(o, source);
  ASSERT_TRUE(prompts.ok());
  for (const TextPrompt& p : *prompts) {
    EXPECT_EQ(p.ids.size(), 20u);  // longer than the corpus: it wraps around
    auto again = tok.Encode(p.text);
    tok.encode_calls--;
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, p.ids);
    EXPECT_EQ(p.output_len, 4);
  }
  EXPECT_LE(tok.encode_calls, 3);
}

TEST(DatasetTest, ConversationsHaveTurnsOfTheRequestedLength) {
  WordTokenizer tok;
  TextPromptSource source({"w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12"}, &tok);
  ConversationOptions o{.num_conversations = 3, .turns = 4, .turn_len = 5, .output_len = 7};
  auto convs = BuildConversations(o, source);
  ASSERT_TRUE(convs.ok());
  ASSERT_EQ(convs->size(), 3u);
  for (const Conversation& c : *convs) {
    ASSERT_EQ(c.user_turns.size(), 4u);
    for (const std::string& t : c.user_turns) EXPECT_EQ(tok.Encode(t)->size(), 5u);
    EXPECT_EQ(c.output_lens, std::vector<int>(4, 7));
  }
}

// ---- serving metrics ----

RequestResult Ok(double ttft, double latency, int out, std::vector<double> itl, int in = 10) {
  RequestResult r;
  r.success = true;
  r.ttft = ttft;
  r.latency = latency;
  r.output_len = out;
  r.prompt_len = in;
  r.itl = std::move(itl);
  return r;
}

TEST(ServeMetricsTest, ComputesVllmDefinitions) {
  std::vector<RequestResult> rs = {
      Ok(0.1, 0.5, 5, {0.1, 0.1, 0.1, 0.1}),  // tpot 0.1
      Ok(0.3, 0.3, 1, {}),                    // one token: no tpot
      Ok(0.2, 1.0, 3, {0.4, 0.4}),            // tpot 0.4
  };
  RequestResult failed;
  failed.error = "HTTP 500";
  rs.push_back(failed);
  GoodputSlos slos;
  slos.ttft_ms = 250;
  slos.tpot_ms = 200;
  BenchmarkMetrics m = ComputeMetrics(rs, 2.0, slos, {50, 99});
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 30);
  EXPECT_EQ(m.total_output, 9);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(m.output_throughput, 4.5);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 19.5);
  EXPECT_NEAR(m.ttft_ms.mean, 200, 1e-9);
  EXPECT_NEAR(m.ttft_ms.median, 200, 1e-9);
  EXPECT_NEAR(m.tpot_ms.mean, 250, 1e-9);  // (100 + 400) / 2: single-token requests excluded
  EXPECT_NEAR(m.itl_ms.mean, 200, 1e-9);   // (4 * 100 + 2 * 400) / 6
  EXPECT_NEAR(m.e2el_ms.mean, 600, 1e-9);
  EXPECT_NEAR(m.e2el_ms.percentiles.at(99), 500 + 500 * 0.98, 1e-9);
  // Good: request 1 (ttft 100, tpot 100). Request 2 misses ttft, request 3 misses tpot.
  EXPECT_EQ(m.good_requests, 1);
  EXPECT_DOUBLE_EQ(m.request_goodput, 0.5);
}

TEST(ServeMetricsTest, GoodputParsing) {
  auto s = ParseGoodput({"ttft:500", "e2el:2000.5"});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->ttft_ms, 500);
  EXPECT_FALSE(s->tpot_ms.has_value());
  EXPECT_EQ(s->e2el_ms, 2000.5);
  EXPECT_FALSE(ParseGoodput({"ttft"}).ok());
  EXPECT_FALSE(ParseGoodput({"foo:1"}).ok());
  EXPECT_FALSE(ParseGoodput({"ttft:-1"}).ok());
  EXPECT_FALSE(ParseGoodput({"ttft:1", "ttft:2"}).ok());
  EXPECT_FALSE(ParseGoodput({}).value().any());
}

TEST(ServeMetricsTest, ReportHasVllmLayoutAndJsonKeys) {
  BenchmarkMetrics m = ComputeMetrics({Ok(0.1, 0.5, 5, {0.1, 0.1, 0.1, 0.1})}, 1.0, {}, {99});
  ReportOptions o;
  o.request_rate = std::numeric_limits<double>::infinity();
  o.max_concurrency = 4;
  const std::string text = FormatReport(m, o);
  EXPECT_NE(text.find("============ Serving Benchmark Result ============\n"), std::string::npos);
  EXPECT_NE(text.find("Successful requests:                     1"), std::string::npos);
  EXPECT_NE(text.find("Maximum request concurrency:             4"), std::string::npos);
  EXPECT_NE(text.find("Request rate configured (RPS):           inf"), std::string::npos);
  EXPECT_NE(text.find("---------------Time to First Token----------------\n"), std::string::npos);
  EXPECT_NE(text.find("-----Time per Output Token (excl. 1st token)------\n"), std::string::npos);
  EXPECT_NE(text.find("P99 TTFT (ms):                           100.00"), std::string::npos);
  EXPECT_NE(text.find("Mean E2EL (ms):                          500.00"), std::string::npos);
  EXPECT_EQ(text.find("goodput"), std::string::npos);
  nlohmann::json j = MetricsJson(m, o);
  EXPECT_DOUBLE_EQ(j["p99_ttft_ms"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(j["mean_tpot_ms"].get<double>(), 100);
  EXPECT_TRUE(j["request_goodput"].is_null());
  EXPECT_EQ(PercentileWord(99.9), "99.9");
  EXPECT_EQ(PercentileWord(50), "50");
}

TEST(ServeMetricsTest, SummarizeByTurn) {
  std::vector<RequestResult> rs = {Ok(0.1, 1, 2, {}, 10), Ok(0.3, 1, 2, {}, 30),
                                   Ok(0.5, 1, 2, {}, 100)};
  rs[0].turn = 0;
  rs[1].turn = 0;
  rs[2].turn = 1;
  auto t = SummarizeByTurn(rs);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].requests, 2);
  EXPECT_NEAR(t[0].mean_ttft_ms, 200, 1e-9);
  EXPECT_NEAR(t[0].mean_prompt_len, 20, 1e-9);
  EXPECT_NEAR(t[1].mean_ttft_ms, 500, 1e-9);
}

}  // namespace
}  // namespace pagellm::bench
