#include "kv/block_hash.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace pagellm {
namespace {

using Tokens = std::vector<int32_t>;
const std::optional<std::string> kNoSalt;

TEST(BlockHashTest, RootIsFixedPerKeySpace) {
  // Golden values: the key format is part of the KV-event contract, so changing it must be
  // deliberate.
  EXPECT_EQ(BlockHashToHex(BlockHasher("").root()),
            "402447bb303f3958fb1fde8ce50528ed9a07ca22d7e87cf4ed86f13340024998");
  // SHA-256(root, u32 count, int32 tokens, salt flag [, u32 length, salt]), little endian.
  BlockHasher h("");
  EXPECT_EQ(BlockHashToHex(h.HashBlock(h.root(), Tokens{1, 2, 3, 4}, kNoSalt)),
            "24e0064db7baffed79e80322dff821e20ce2c4ce72fcc53787591701905668cb");
  EXPECT_EQ(BlockHashToHex(h.HashBlock(h.root(), Tokens{1, 2, 3, 4}, std::string("s"))),
            "5b4be038dfc7dc7bcc31633f8c8bf4e95f1ec04cf33313c0b777fa2adf22bdc8");
  EXPECT_EQ(BlockHasher("m/kv=auto").root(), BlockHasher("m/kv=auto").root());
  EXPECT_NE(BlockHasher("m/kv=auto").root(), BlockHasher("m/kv=fp8_e4m3").root());
  EXPECT_EQ(BlockHashToHex(BlockHasher("").root()).size(), 64u);
}

TEST(BlockHashTest, KeyCoversParentTokensAndSalt) {
  BlockHasher h("");
  const BlockHash a = h.HashBlock(h.root(), Tokens{1, 2, 3, 4}, kNoSalt);
  EXPECT_EQ(a, h.HashBlock(h.root(), Tokens{1, 2, 3, 4}, kNoSalt));
  std::set<BlockHash> distinct = {
      a,
      h.HashBlock(h.root(), Tokens{1, 2, 3, 5}, kNoSalt),
      h.HashBlock(h.root(), Tokens{1, 2, 3}, kNoSalt),
      h.HashBlock(a, Tokens{1, 2, 3, 4}, kNoSalt),
      h.HashBlock(h.root(), Tokens{1, 2, 3, 4}, std::string("tenant-a")),
      h.HashBlock(h.root(), Tokens{1, 2, 3, 4}, std::string("tenant-b")),
      h.HashBlock(h.root(), Tokens{1, 2, 3, 4}, std::string("")),  // empty != absent
      BlockHasher("kv=fp8").HashBlock(BlockHasher("kv=fp8").root(), Tokens{1, 2, 3, 4}, kNoSalt),
  };
  EXPECT_EQ(distinct.size(), 8u);
  // Token ids are serialized with fixed width: no token split can alias another.
  EXPECT_NE(h.HashBlock(h.root(), Tokens{256, 0}, kNoSalt),
            h.HashBlock(h.root(), Tokens{1, 0}, kNoSalt));
}

TEST(BlockHashTest, ExtendIsIncrementalChainedAndSaltsOnlyTheFirstBlock) {
  BlockHasher h("x");
  const Tokens tokens = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  std::vector<BlockHash> all;
  h.ExtendBlockHashes(tokens, 4, kNoSalt, all);
  ASSERT_EQ(all.size(), 2u);  // the partial third block is not hashed
  EXPECT_EQ(all[0], h.HashBlock(h.root(), Tokens{10, 11, 12, 13}, kNoSalt));
  EXPECT_EQ(all[1], h.HashBlock(all[0], Tokens{14, 15, 16, 17}, kNoSalt));

  std::vector<BlockHash> inc;
  h.ExtendBlockHashes(std::span(tokens).first(5), 4, kNoSalt, inc);
  EXPECT_EQ(inc.size(), 1u);
  h.ExtendBlockHashes(tokens, 4, kNoSalt, inc);
  EXPECT_EQ(inc, all);

  const std::optional<std::string> salt = "s";
  std::vector<BlockHash> salted;
  h.ExtendBlockHashes(tokens, 4, salt, salted);
  EXPECT_EQ(salted[0], h.HashBlock(h.root(), Tokens{10, 11, 12, 13}, salt));
  EXPECT_EQ(salted[1], h.HashBlock(salted[0], Tokens{14, 15, 16, 17}, kNoSalt));
  EXPECT_NE(salted[1], all[1]);  // the salt reaches every later block through the chain
}

}  // namespace
}  // namespace pagellm
