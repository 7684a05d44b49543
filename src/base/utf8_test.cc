#include "base/utf8.h"

#include <gtest/gtest.h>

#include <random>

namespace pagellm {
namespace {

const std::string kFffd(kReplacementChar);

TEST(Utf8, SequenceLength) {
  EXPECT_EQ(Utf8SequenceLength("a", 0), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xC3\xA9", 0), 2u);
  EXPECT_EQ(Utf8SequenceLength("\xE4\xB8\xAD", 0), 3u);
  EXPECT_EQ(Utf8SequenceLength("\xF0\x9F\xA6\x99", 0), 4u);
  EXPECT_EQ(Utf8SequenceLength("\xE4\xB8", 0), 0u);          // truncated
  EXPECT_EQ(Utf8SequenceLength("\xC0\xAF", 0), 0u);          // overlong
  EXPECT_EQ(Utf8SequenceLength("\xED\xA0\x80", 0), 0u);      // surrogate
  EXPECT_EQ(Utf8SequenceLength("\xF4\x90\x80\x80", 0), 0u);  // > U+10FFFF
  EXPECT_EQ(Utf8SequenceLength("\x80", 0), 0u);
  uint32_t cp = 0;
  EXPECT_EQ(DecodeUtf8("\xF0\x9F\xA6\x99", 0, &cp), 4u);
  EXPECT_EQ(cp, 0x1F999u);
}

TEST(Utf8, AppendRoundTrips) {
  for (uint32_t cp : {0x41u, 0xE9u, 0x7FFu, 0x800u, 0x4E2Du, 0xFFFDu, 0x10000u, 0x10FFFFu}) {
    std::string s;
    AppendUtf8(cp, &s);
    uint32_t back = 0;
    EXPECT_EQ(DecodeUtf8(s, 0, &back), s.size());
    EXPECT_EQ(back, cp);
  }
}

TEST(Utf8, RepairUsesMaximalSubparts) {
  EXPECT_EQ(RepairUtf8("héllo 🦙"), "héllo 🦙");
  EXPECT_EQ(RepairUtf8("a\xE4\xB8"), "a" + kFffd);  // one truncated sequence
  EXPECT_EQ(RepairUtf8("\xE4\xB8z"), kFffd + "z");
  EXPECT_EQ(RepairUtf8("\xF0\x9F\xA6"), kFffd);
  EXPECT_EQ(RepairUtf8("\x80\x80"), kFffd + kFffd);              // each stray continuation
  EXPECT_EQ(RepairUtf8("\xC0\xAF"), kFffd + kFffd);              // C0 never starts a sequence
  EXPECT_EQ(RepairUtf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate: ED, A0, 80
  EXPECT_EQ(RepairUtf8("\xFF"), kFffd);
  EXPECT_TRUE(IsValidUtf8(RepairUtf8("\xE4\xB8\xE4\xB8\xAD\x80")));
  EXPECT_EQ(RepairUtf8("\xE4\xB8\xE4\xB8\xAD\x80"), kFffd + "中" + kFffd);
}

TEST(Utf8, IncompleteSuffix) {
  EXPECT_EQ(IncompleteUtf8Suffix(""), 0u);
  EXPECT_EQ(IncompleteUtf8Suffix("abc"), 0u);
  EXPECT_EQ(IncompleteUtf8Suffix("a\xE4"), 1u);
  EXPECT_EQ(IncompleteUtf8Suffix("a\xE4\xB8"), 2u);
  EXPECT_EQ(IncompleteUtf8Suffix("\xF0\x9F\xA6"), 3u);
  EXPECT_EQ(IncompleteUtf8Suffix("\xE4\xB8\xAD"), 0u);
  EXPECT_EQ(IncompleteUtf8Suffix("\x80"), 0u);
  EXPECT_EQ(IncompleteUtf8Suffix("\xED\xA0"), 0u);  // can never complete
}

// The property the incremental detokenizer relies on: repair is compositional at any split
// where the left part does not end inside an incomplete sequence.
TEST(Utf8, RepairIsCompositionalAtBoundaries) {
  std::mt19937 rng(7);
  const char alphabet[] = {'a',    ' ',    '\x80', '\xBF', '\xC3', '\xA9', '\xE4', '\xB8',
                           '\xAD', '\xF0', '\x9F', '\xA6', '\x99', '\xED', '\xFF', '\xC0'};
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s;
    for (int n = rng() % 12; n > 0; --n) s.push_back(alphabet[rng() % sizeof(alphabet)]);
    const size_t cut = s.empty() ? 0 : rng() % (s.size() + 1);
    const std::string left = s.substr(0, cut);
    if (IncompleteUtf8Suffix(left) != 0) continue;
    EXPECT_EQ(RepairUtf8(s), RepairUtf8(left) + RepairUtf8(s.substr(cut)));
  }
}

}  // namespace
}  // namespace pagellm
