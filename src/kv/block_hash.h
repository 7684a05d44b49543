// Prefix-cache keys: a chained SHA-256 over full blocks of token ids.
//
// The key of block i is SHA-256(parent key, the block's token ids, extra keys), with the root
// ("NONE_HASH" in vLLM) as the parent of block 0. Chaining makes a hit on block i imply that the
// whole prefix up to block i matches, so lookups walk left to right and stop at the first miss.
//
// Why SHA-256 and no token check on hit: a hit hands one request's KV to another, so a collision
// would silently corrupt output (or leak another tenant's prompt). With a 256-bit
// collision-resistant digest the probability is negligible even adversarially, which lets the
// pool keep only digests (TurboMind instead compares token ids on every hit; TensorRT-LLM, like
// us, relies on a cryptographic hash).
//
// Key space: the root is derived from a caller-given string naming everything that changes the
// KV of identical tokens (model, KV dtype and its scales). Caches of different key spaces never
// share a single key, so e.g. an fp8 cache can never serve a block written as fp32.
//
// The root is fixed per key space rather than random (vLLM seeds it randomly unless
// PYTHONHASHSEED is set): keys are then reproducible across processes, which KV-event consumers
// and tests want, and a random seed buys nothing once the hash is collision resistant. Tenant
// isolation comes from cache_salt instead.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pagellm {

using BlockHash = std::array<uint8_t, 32>;

// For unordered containers: the digest is already uniformly distributed, so its first 8 bytes
// are a perfectly good bucket hash.
struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const {
    uint64_t v;
    std::memcpy(&v, h.data(), sizeof(v));
    return static_cast<size_t>(v);
  }
};

// Lowercase hex, 64 characters (logs and KV events).
std::string BlockHashToHex(const BlockHash& h);

class BlockHasher {
 public:
  // `key_space` e.g. "llama-3-8b/kv=fp8_e4m3"; see the file comment.
  explicit BlockHasher(std::string_view key_space);

  // The parent of the first block ("NONE_HASH").
  const BlockHash& root() const { return root_; }

  // Key of one full block. `cache_salt` is an extra key of the first block only (callers pass
  // nullopt for later blocks); an absent salt and an empty salt are different keys.
  BlockHash HashBlock(const BlockHash& parent, std::span<const int32_t> token_ids,
                      const std::optional<std::string>& cache_salt) const;

  // Appends to `hashes` the key of every full block of `token_ids` (block_size tokens each) that
  // it does not hold yet. Incremental: a request calls this whenever tokens are appended, and
  // keys computed once are reused after preemption.
  void ExtendBlockHashes(std::span<const int32_t> token_ids, int block_size,
                         const std::optional<std::string>& cache_salt,
                         std::vector<BlockHash>& hashes) const;

 private:
  BlockHash root_;
};

}  // namespace pagellm
