// BlockPool: ownership, reference counts and prefix-cache index of the device KV blocks.
//
// Semantics follow vLLM V1's BlockPool:
//  * Block 0 is the null block: taken out at construction, never handed out, freed or cached.
//  * A block is free when its ref_cnt is 0; free blocks sit in an LRU FreeBlockQueue. A free
//    block keeps its hash (it stays hittable) until allocation pops it and evicts the hash.
//  * The hash index allows several blocks per hash: blocks are never de-duplicated on insert, so
//    block tables stay append-only.
//  * Running out of blocks is a value (nullopt), never an abort.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/free_block_queue.h"

namespace pagellm {

struct KvCacheBlock {
  int32_t id = 0;
  int32_t ref_cnt = 0;
  std::optional<BlockHash> hash;  // set while the block is in the prefix cache
};

class BlockPool {
 public:
  static constexpr int32_t kNullBlockId = 0;

  // num_blocks includes the null block, so num_blocks - 1 blocks are usable.
  BlockPool(int32_t num_blocks, bool enable_caching);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t num_usable_blocks() const { return num_blocks() - 1; }
  int32_t num_free_blocks() const { return free_queue_.size(); }
  bool enable_caching() const { return enable_caching_; }
  const KvCacheBlock& block(int32_t id) const;

  // Fraction of usable blocks in use, 1 - free/usable (vLLM semantics: cached-but-free blocks
  // count as free, so this drops to 0 when requests finish although their prefixes stay cached).
  double Usage() const;

  // Pops n blocks from the front of the free queue (least recently freed first), evicting any
  // hash they still carry, and gives each ref_cnt 1. nullopt, with nothing changed, if fewer
  // than n blocks are free.
  std::optional<std::vector<int32_t>> GetNewBlocks(int32_t n);

  // Takes a reference on blocks found in the prefix cache: a free one (ref_cnt 0) leaves the
  // free queue, so it cannot be evicted while in use.
  void Touch(std::span<const int32_t> ids);

  // Drops one reference per listed block; blocks reaching 0 are appended to the free queue in
  // the given order. Callers pass a request's blocks in reverse, so its tail blocks (the most
  // specific, least shareable prefix) are evicted before its head.
  void FreeBlocks(std::span<const int32_t> ordered_ids);

  // Puts blocks block_ids[num_cached_blocks .. num_full_blocks) of a request into the prefix
  // cache under block_hashes[i]. Those blocks must not be cached yet.
  void CacheFullBlocks(std::span<const int32_t> block_ids, std::span<const BlockHash> block_hashes,
                       int32_t num_cached_blocks, int32_t num_full_blocks);

  // Puts one block into the prefix cache under `hash`; it must not be cached yet.
  void CacheBlock(int32_t id, const BlockHash& hash);

  // Removes one block from the prefix cache (no-op if it carries no hash). Used when a block was
  // cached for tokens that will never be computed (see KvCacheManager::Free).
  void UncacheBlock(int32_t id);

  // A block cached under `hash` (the earliest inserted one), or nullopt.
  std::optional<int32_t> GetCachedBlock(const BlockHash& hash) const;

  // Forgets every cached hash. Refused (false) unless every usable block is free, because
  // running requests still append to blocks whose hashes other requests could hit.
  bool ResetPrefixCache();

  // Number of cached blocks (for tests and stats).
  int32_t num_cached_blocks() const { return num_cached_blocks_; }
  // Cumulative count of cached blocks whose hash was evicted to make room.
  int64_t num_evictions() const { return num_evictions_; }

  // Free queue from front (next to be allocated) to back, for tests and debugging.
  std::vector<int32_t> FreeQueueOrder() const { return free_queue_.ToVector(); }

 private:
  KvCacheBlock& mutable_block(int32_t id);
  void EvictCachedHash(KvCacheBlock& block);

  bool enable_caching_;
  std::vector<KvCacheBlock> blocks_;
  FreeBlockQueue free_queue_;
  // hash -> blocks cached under it, in insertion order. Almost always one entry; duplicates
  // appear when two requests compute the same block concurrently.
  std::unordered_map<BlockHash, std::vector<int32_t>, BlockHashHasher> cached_;
  int32_t num_cached_blocks_ = 0;
  int64_t num_evictions_ = 0;
};

}  // namespace pagellm
