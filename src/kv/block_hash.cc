#include "kv/block_hash.h"

#include <openssl/sha.h>

#include "pagellm/check.h"

namespace pagellm {
namespace {

// Every field is length-prefixed and fixed-endian so that distinct (parent, tokens, salt)
// triples can never serialize to the same bytes.
void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

BlockHash Sha256(const std::string& bytes) {
  BlockHash h;
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), h.data());
  return h;
}

}  // namespace

std::string BlockHashToHex(const BlockHash& h) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * h.size());
  for (uint8_t b : h) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 0xf]);
  }
  return s;
}

BlockHasher::BlockHasher(std::string_view key_space) {
  std::string bytes = "pagellm/prefix-cache/v1";
  bytes.push_back('\0');
  PutU32(bytes, static_cast<uint32_t>(key_space.size()));
  bytes.append(key_space);
  root_ = Sha256(bytes);
}

BlockHash BlockHasher::HashBlock(const BlockHash& parent, std::span<const int32_t> token_ids,
                                 const std::optional<std::string>& cache_salt) const {
  std::string bytes;
  bytes.reserve(parent.size() + 4 + 4 * token_ids.size() + 5 +
                (cache_salt ? cache_salt->size() : 0));
  bytes.append(reinterpret_cast<const char*>(parent.data()), parent.size());
  PutU32(bytes, static_cast<uint32_t>(token_ids.size()));
  for (int32_t t : token_ids) PutU32(bytes, static_cast<uint32_t>(t));
  bytes.push_back(cache_salt ? 1 : 0);
  if (cache_salt) {
    PutU32(bytes, static_cast<uint32_t>(cache_salt->size()));
    bytes.append(*cache_salt);
  }
  return Sha256(bytes);
}

void BlockHasher::ExtendBlockHashes(std::span<const int32_t> token_ids, int block_size,
                                    const std::optional<std::string>& cache_salt,
                                    std::vector<BlockHash>& hashes) const {
  CHECK_GT(block_size, 0);
  const size_t num_full = token_ids.size() / static_cast<size_t>(block_size);
  CHECK_LE(hashes.size(), num_full) << "more block hashes than full blocks";
  static const std::optional<std::string> kNoSalt;
  for (size_t i = hashes.size(); i < num_full; ++i) {
    const BlockHash& parent = i == 0 ? root_ : hashes[i - 1];
    hashes.push_back(HashBlock(parent, token_ids.subspan(i * block_size, block_size),
                               i == 0 ? cache_salt : kNoSalt));
  }
}

}  // namespace pagellm
