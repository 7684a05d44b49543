#include "grammar/grammar_matcher.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "grammar/grammar_compiler.h"
#include "grammar/grammar_test_util.h"

namespace pagellm {
namespace {

bool Bit(const std::vector<uint64_t>& mask, int32_t id) {
  return (mask[id >> 6] >> (id & 63)) & 1;
}

// The mask by brute force: accept each token and roll it back.
std::vector<uint64_t> BruteForceMask(GrammarMatcher& m) {
  const TokenVocabulary& v = m.grammar().vocab();
  std::vector<uint64_t> mask(v.mask_words(), 0);
  for (int32_t id = 0; id < v.mask_size(); ++id) {
    if (m.AcceptToken(id)) {
      mask[id >> 6] |= uint64_t{1} << (id & 63);
      m.Rollback(1);
    }
  }
  return mask;
}

std::shared_ptr<const CompiledGrammar> Compile(const StructuredOutputs& spec,
                                               std::shared_ptr<const TokenVocabulary> vocab) {
  auto g = BuildGrammar(spec);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::make_shared<const CompiledGrammar>(*g, std::move(vocab));
}

// Random walks under the mask: every mask equals the brute-force one, every finished text
// matches the grammar.
void CheckRandomWalks(const StructuredOutputs& spec, std::shared_ptr<const TokenVocabulary> vocab,
                      int walks, int max_steps, bool brute_force_each_step) {
  auto compiled = Compile(spec, vocab);
  auto grammar = BuildGrammar(spec);
  std::mt19937 rng(11);
  std::vector<uint64_t> mask(vocab->mask_words());
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(compiled);
    std::string text;
    for (int step = 0; step < max_steps && !m.IsTerminated(); ++step) {
      m.FillMask(mask);
      if (brute_force_each_step) {
        ASSERT_EQ(mask, BruteForceMask(m)) << "after '" << text << "'";
      }
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->mask_size(); ++id)
        if (Bit(mask, id)) allowed.push_back(id);
      ASSERT_FALSE(allowed.empty()) << "dead end after '" << text << "'";
      const int32_t t = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.AcceptToken(t));
      if (std::find(vocab->eos_ids().begin(), vocab->eos_ids().end(), t) == vocab->eos_ids().end())
        text += vocab->bytes(t);
    }
    if (m.IsTerminated()) {
      EXPECT_TRUE(GrammarMatches(*grammar, text)) << text;
    }
  }
}

TEST(GrammarMatcherTest, MaskEqualsBruteForceOnByteVocabulary) {
  int32_t eos = 0;
  auto vocab =
      ByteVocabulary({"{\"", "\":", "\",", "ab", "a\"", "\"}", "12", "true", "},", " \""}, &eos);
  StructuredOutputs json;
  json.kind = StructuredOutputs::Kind::kJson;
  json.spec = R"({"type":"object","properties":{"a":{"type":"string","maxLength":4},
      "b":{"type":"array","items":{"type":"integer"},"maxItems":3},"c":{"type":"boolean"}},
      "required":["a"]})";
  CheckRandomWalks(json, vocab, 40, 60, true);
  StructuredOutputs gbnf;
  gbnf.kind = StructuredOutputs::Kind::kGrammar;
  gbnf.spec = "root ::= (\"ab\" | \"a\" [0-9]+ | \"{\" root \"}\")+";
  CheckRandomWalks(gbnf, vocab, 40, 30, true);
  StructuredOutputs choice;
  choice.kind = StructuredOutputs::Kind::kChoice;
  choice.choice = {"ab", "a\"", "true", "tr"};
  CheckRandomWalks(choice, vocab, 20, 10, true);
}

TEST(GrammarMatcherTest, EosOnlyWhereTheGrammarMayEndAndRollback) {
  int32_t eos = 0;
  auto vocab = ByteVocabulary({"ab"}, &eos);
  StructuredOutputs re;
  re.kind = StructuredOutputs::Kind::kRegex;
  re.spec = "(ab)+c?";
  GrammarMatcher m(Compile(re, vocab));
  std::vector<uint64_t> mask(vocab->mask_words());
  EXPECT_FALSE(m.AcceptToken(eos));
  EXPECT_FALSE(m.AcceptToken(eos + 1));  // special tokens never
  EXPECT_TRUE(m.AcceptToken('a'));
  m.FillMask(mask);
  EXPECT_TRUE(Bit(mask, 'b'));
  EXPECT_FALSE(Bit(mask, eos));
  EXPECT_TRUE(m.AcceptToken('b'));
  m.FillMask(mask);
  EXPECT_TRUE(Bit(mask, eos));
  EXPECT_TRUE(Bit(mask, 'c'));
  EXPECT_TRUE(Bit(mask, 256));  // "ab"
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_TRUE(m.AcceptToken('c'));
  EXPECT_TRUE(m.IsTerminated());  // nothing may follow "c"
  m.FillMask(mask);
  EXPECT_TRUE(std::all_of(mask.begin(), mask.end(), [](uint64_t w) { return w == 0; }));
  m.Rollback(2);
  EXPECT_EQ(m.num_accepted(), 1);
  EXPECT_FALSE(m.CanEnd());
  EXPECT_TRUE(m.AcceptToken('b'));
  EXPECT_TRUE(m.AcceptToken(eos));
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_FALSE(m.AcceptToken('a'));
}

TEST(GrammarCompilerTest, CachesByKey) {
  int32_t eos = 0;
  GrammarCompiler compiler(ByteVocabulary({}, &eos), 2);
  StructuredOutputs a;
  a.kind = StructuredOutputs::Kind::kRegex;
  a.spec = "a+";
  auto first = compiler.Compile(a);
  auto again = compiler.Compile(a);
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first->get(), again->get());
  EXPECT_EQ(compiler.stats().hits, 1);
  a.whitespace_pattern = " ";
  ASSERT_TRUE(compiler.Compile(a).ok());
  EXPECT_EQ(compiler.stats().misses, 2);
  a.spec = "(";
  EXPECT_FALSE(compiler.Compile(a).ok());
}

}  // namespace
}  // namespace pagellm
