// Grammar engine benchmark: compile time per JSON schema (the test suite's schemas) and the
// time to build one token mask, over a real tokenizer's vocabulary.
//
//   build/bench/grammar_bench --tokenizer ../shared/tokenizers/qwen3
//       [--schemas tests/structured_outputs/json_schemas.json] [--steps 2000] [--seed 1]
//
// Masks: random walks through the nested schema below (each step fills the mask and accepts a
// uniformly drawn allowed token, as a sampler at temperature 1 on flat logits would), timing
// every FillMask; prints median, p90, p99 and max in microseconds. Compile: every schema of the
// suite compiled from scratch (no cache), median and max in milliseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/grammar_vocabulary.h"
#include "grammar/grammar_compiler.h"
#include "grammar/grammar_matcher.h"
#include "nlohmann/json.hpp"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kNestedSchema = R"({
  "type": "object",
  "properties": {
    "id": {"type": "integer", "minimum": 0},
    "name": {"type": "string", "maxLength": 40},
    "email": {"type": "string", "format": "email"},
    "created": {"type": "string", "format": "date-time"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 5},
    "address": {"type": "object", "properties": {
        "street": {"type": "string"}, "city": {"type": "string"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
        "geo": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}],
                "items": false}},
      "required": ["street", "city"]},
    "orders": {"type": "array", "maxItems": 3, "items": {"type": "object", "properties": {
        "sku": {"type": "string", "format": "uuid"},
        "qty": {"type": "integer", "minimum": 1, "maximum": 99},
        "status": {"enum": ["new", "paid", "shipped"]}},
      "required": ["sku", "qty", "status"]}},
    "active": {"type": "boolean"}
  },
  "required": ["id", "name", "tags", "address", "active"]
})";

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1)))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_dir, schemas_path;
  int steps = 2000;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--tokenizer")
      tokenizer_dir = argv[i + 1];
    else if (a == "--schemas")
      schemas_path = argv[i + 1];
    else if (a == "--steps")
      steps = std::stoi(argv[i + 1]);
    else if (a == "--seed")
      seed = std::stoull(argv[i + 1]);
  }
  if (tokenizer_dir.empty()) {
    std::fprintf(stderr, "usage: grammar_bench --tokenizer DIR [--schemas FILE] [--steps N]\n");
    return 2;
  }
  auto tok = pagellm::LoadTokenizerFromDir(tokenizer_dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  const pagellm::Tokenizer& t = **tok;
  std::vector<int32_t> eos = t.stop_ids();
  if (t.eos_id() >= 0 && std::find(eos.begin(), eos.end(), t.eos_id()) == eos.end())
    eos.push_back(t.eos_id());
  auto start = Clock::now();
  auto vocab = pagellm::BuildTokenVocabulary(t, t.vocab_size(), eos);
  std::printf("vocabulary: %d ids, %zu usable, built in %.1f ms\n", vocab->mask_size(),
              vocab->sorted_ids().size(),
              std::chrono::duration<double, std::milli>(Clock::now() - start).count());

  pagellm::StructuredOutputs spec;
  spec.kind = pagellm::StructuredOutputs::Kind::kJson;
  spec.spec = kNestedSchema;
  start = Clock::now();
  auto grammar = pagellm::BuildGrammar(spec);
  if (!grammar.ok()) {
    std::fprintf(stderr, "%s\n", grammar.status().ToString().c_str());
    return 1;
  }
  auto compiled = std::make_shared<const pagellm::CompiledGrammar>(*grammar, vocab);
  std::printf("nested schema: compiled in %.1f ms, %.1f MiB of token tables\n",
              std::chrono::duration<double, std::milli>(Clock::now() - start).count(),
              static_cast<double>(compiled->memory_bytes()) / (1 << 20));

  std::mt19937_64 rng(seed);
  std::vector<uint64_t> mask(vocab->mask_words());
  std::vector<double> us;
  int walks = 0, finished = 0;
  while (static_cast<int>(us.size()) < steps) {
    pagellm::GrammarMatcher m(compiled);
    ++walks;
    for (int s = 0; s < 400 && static_cast<int>(us.size()) < steps; ++s) {
      const auto t0 = Clock::now();
      m.FillMask(mask);
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->mask_size(); ++id)
        if ((mask[id >> 6] >> (id & 63)) & 1) allowed.push_back(id);
      if (allowed.empty()) break;
      m.AcceptToken(allowed[rng() % allowed.size()]);
      if (m.IsTerminated()) {
        ++finished;
        break;
      }
    }
  }
  std::printf(
      "mask: %zu masks over %d walks (%d finished): median %.1f us, p90 %.1f us, "
      "p99 %.1f us, max %.1f us\n",
      us.size(), walks, finished, Percentile(us, 0.5), Percentile(us, 0.9), Percentile(us, 0.99),
      Percentile(us, 1.0));

  if (!schemas_path.empty()) {
    std::ifstream in(schemas_path);
    std::stringstream ss;
    ss << in.rdbuf();
    const nlohmann::json suite = nlohmann::json::parse(ss.str(), nullptr, false);
    std::vector<double> ms;
    for (const auto& c : suite) {
      if (c.value("invalid", false)) continue;
      pagellm::StructuredOutputs s;
      s.kind = pagellm::StructuredOutputs::Kind::kJson;
      s.spec = c["schema"].dump();
      const auto t0 = Clock::now();
      auto g = pagellm::BuildGrammar(s);
      if (!g.ok()) {
        std::fprintf(stderr, "%s: %s\n", c["name"].get<std::string>().c_str(),
                     g.status().ToString().c_str());
        continue;
      }
      pagellm::CompiledGrammar cg(*g, vocab);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    if (!ms.empty())
      std::printf("compile: %zu schemas, median %.1f ms, max %.1f ms\n", ms.size(),
                  Percentile(ms, 0.5), Percentile(ms, 1.0));
  }
  return 0;
}
