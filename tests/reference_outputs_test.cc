// The shared tiny real models must reproduce their float64 greedy references exactly:
// every token id of every EXPECTED.md/expected.json entry, byte-for-byte text, and top-5
// logits at the last prompt position. Runs both the Hugging Face directory and the GGUF file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "engine/model_session.h"
#include "engine/sequential_generator.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

namespace fs = std::filesystem;
const std::string kShared = PAGELLM_SHARED_DIR;

struct Case {
  std::string model_dir;   // folder with expected.json
  std::string model_path;  // what to load (dir or .gguf)
};

std::vector<nlohmann::json> Entries(const nlohmann::json& expected) {
  std::vector<nlohmann::json> out;
  for (const auto& [key, value] : expected.items()) {
    if (key.rfind("bos", 0) == 0 && value.is_object()) out.push_back(value);
    if (key == "prompts")
      for (const auto& p : value) out.push_back(p);
  }
  return out;
}

class ReferenceOutputsTest : public testing::TestWithParam<Case> {};

TEST_P(ReferenceOutputsTest, GreedyMatchesFloat64Reference) {
  const Case& c = GetParam();
  const std::string expected_path = kShared + "/models/" + c.model_dir + "/expected.json";
  if (!fs::exists(expected_path)) GTEST_SKIP() << "shared assets absent: " << expected_path;
  std::ifstream in(expected_path);
  const nlohmann::json expected = nlohmann::json::parse(in);

  SessionOptions opts;
  opts.model_path = kShared + "/models/" + c.model_path;
  auto session = ModelSession::Open(opts);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ModelSession& s = **session;
  SequentialGenerator gen(&s);

  int checked = 0;
  for (const nlohmann::json& e : Entries(expected)) {
    const std::string prompt = e["prompt"];
    std::vector<int32_t> prompt_ids = s.tokenizer()->Encode(prompt, true, false);
    if (prompt.empty()) prompt_ids = {s.tokenizer()->bos_id()};
    EXPECT_EQ(prompt_ids, e["prompt_ids"].get<std::vector<int32_t>>()) << "prompt: " << prompt;
    const auto want = e["out_ids"].get<std::vector<int32_t>>();
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = static_cast<int>(want.size());
    p.ignore_eos = true;
    p.logprobs = 5;
    auto out = gen.Generate(prompt_ids, p);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->token_ids, want) << c.model_path << " prompt '" << prompt << "'";
    EXPECT_EQ(out->text, e["continuation"].get<std::string>()) << c.model_path;
    // Top-5 at the last prompt position = logprobs of the first generated token, shifted by
    // the log-sum-exp; compare logit differences to the reference (within 1e-4 relative).
    ASSERT_FALSE(out->logprobs.empty());
    const auto& top = out->logprobs[0].top;
    const auto& ref = e["top5_last_prompt"];
    ASSERT_EQ(top.size(), ref.size());
    const float ref0 = ref[0][1].get<float>();
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(top[i].first, ref[i][0].get<int32_t>()) << "rank " << i;
      const float want_diff = ref[i][1].get<float>() - ref0;
      const float got_diff = top[i].second - top[0].second;
      EXPECT_NEAR(got_diff, want_diff, 1e-4 * std::abs(ref0) + 1e-5) << "rank " << i;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(SharedModels, ReferenceOutputsTest,
                         testing::Values(Case{"stories260K", "stories260K"},
                                         Case{"stories260K", "stories260K/stories260K.gguf"},
                                         Case{"llama2xs-279K", "llama2xs-279K"},
                                         Case{"babyllama-tok105", "babyllama-tok105"}),
                         [](const testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.model_path;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// The CLI path: `pagellm generate` with an empty prompt reproduces the 200-token BOS text.
TEST(GenerateCliTest, StoriesBosTextByteForByte) {
  const std::string dir = kShared + "/models/stories260K";
  if (!fs::exists(dir + "/expected.json")) GTEST_SKIP() << "shared assets absent";
  std::ifstream in(dir + "/expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  const std::string want = expected["bos200"]["continuation"];
  for (const std::string& model : {dir, dir + "/stories260K.gguf"}) {
    const std::string cmd = std::string(PAGELLM_BINARY) + " generate --model " + model +
                            " --prompt '' --temperature 0 --max-tokens 200 --ignore-eos";
    FILE* pipe = popen(cmd.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string got;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) got.append(buf, n);
    EXPECT_EQ(pclose(pipe), 0);
    ASSERT_FALSE(got.empty());
    ASSERT_EQ(got.back(), '\n');
    got.pop_back();
    EXPECT_EQ(got, want) << model;
  }
}

}  // namespace
}  // namespace pagellm
