// KvCacheManager: per-request block tables on top of the BlockPool, prefix-cache lookups, and
// the swap path to a secondary (host) pool. Pure bookkeeping: it never touches KV data; copies
// it decides on are returned as lists for the executor to perform.
//
// Mirrors vLLM V1's KVCacheManager (single attention type, full attention):
//  * GetComputedBlocks: longest cached prefix, block aligned, capped at num_tokens - 1.
//  * AllocateSlots: all-or-nothing growth of a block table; caches newly full blocks up to the
//    verified tokens (never speculative ones).
//  * Free: releases a table in reverse order so tail blocks are evicted first.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/request.h"
#include "kv/secondary_block_pool.h"

namespace pagellm {

// One block copy for the executor: device -> host on swap-out, host -> device on swap-in.
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
  bool operator==(const BlockCopy&) const = default;
};

struct ComputedBlocks {
  std::vector<int32_t> block_ids;  // cached prefix blocks, in order
  int32_t num_tokens = 0;          // block_ids.size() * block_size
};

// Counted once per admission (vLLM counts every lookup, so a request that waits several steps
// for room inflates its numbers); requests resumed after preemption go to the preempted_*
// fields, as in vLLM's PrefixCacheStats. Requests skipping the lookup are not counted.
struct PrefixCacheStats {
  int64_t requests = 0;
  int64_t queries = 0;  // tokens looked up
  int64_t hits = 0;     // tokens found
  int64_t preempted_requests = 0;
  int64_t preempted_queries = 0;
  int64_t preempted_hits = 0;
};

class KvCacheManager {
 public:
  // num_blocks counts the null block. key_space names the KV layout (model, KV dtype): prefix
  // keys of different key spaces never match (see block_hash.h). num_secondary_blocks = 0
  // disables swapping.
  KvCacheManager(int32_t block_size, int32_t num_blocks, bool enable_prefix_caching,
                 int32_t max_model_len, int32_t num_secondary_blocks = 0,
                 std::string_view key_space = "");

  int32_t block_size() const { return block_size_; }
  int32_t max_model_len() const { return max_model_len_; }
  bool enable_prefix_caching() const { return enable_prefix_caching_; }
  bool swap_enabled() const { return secondary_pool_.num_blocks() > 0; }
  const BlockPool& block_pool() const { return pool_; }
  const SecondaryBlockPool& secondary_pool() const { return secondary_pool_; }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  double Usage() const { return pool_.Usage(); }
  const PrefixCacheStats& prefix_cache_stats() const { return stats_; }
  // Blocks needed to hold num_tokens tokens.
  int32_t NumBlocksFor(int32_t num_tokens) const {
    return (num_tokens + block_size_ - 1) / block_size_;
  }

  // Extends req.block_hashes to cover every full block of its tokens. Cheap when up to date;
  // AllocateSlots and GetComputedBlocks call it themselves. No-op without prefix caching.
  void UpdateBlockHashes(Request& req) const;

  // Longest prefix of req's tokens whose blocks are cached, capped at num_tokens - 1 tokens (the
  // last token must be computed to get logits). Empty when caching is off or the request skips
  // the prefix cache. Takes no references: pass the result to AllocateSlots in the same step.
  ComputedBlocks GetComputedBlocks(Request& req);

  // Grows req's block table to hold num_computed_tokens + num_new_computed_tokens +
  // num_new_tokens + num_lookahead_tokens tokens (capped at max_model_len), first adopting
  // new_computed_blocks (prefix hits; only for a request without a table). Returns the newly
  // allocated block ids, or nullopt with nothing changed if the pool cannot supply them.
  // num_new_tokens > 0.
  std::optional<std::vector<int32_t>> AllocateSlots(
      Request& req, int32_t num_new_tokens, int32_t num_new_computed_tokens = 0,
      std::span<const int32_t> new_computed_blocks = {}, int32_t num_lookahead_tokens = 0);

  // Releases everything req holds, device table (reverse order) or swapped host blocks. Blocks
  // cached for tokens beyond req.num_computed_tokens (scheduled this step but never computed:
  // a victim preempted in the step that filled them) lose their hash first, so the prefix cache
  // only ever serves KV that was written. Call before resetting num_computed_tokens.
  void Free(const Request& req);

  // Device block table (empty if req holds none).
  std::span<const int32_t> BlockTable(const std::string& request_id) const;
  bool HasBlocks(const std::string& request_id) const { return tables_.contains(request_id); }
  bool IsSwapped(const std::string& request_id) const { return swapped_.contains(request_id); }

  // Forgets all cached prefixes; refused (false) while any block is in use.
  bool ResetPrefixCache() { return pool_.ResetPrefixCache(); }

  // Swap-out: moves the blocks holding req's computed tokens to the secondary pool and frees its
  // device table. Returns (device, host) copies the executor must perform before the device
  // blocks are written again (i.e. before the step's forward pass), or nullopt with nothing
  // changed if the secondary pool lacks room (caller falls back to recompute).
  std::optional<std::vector<BlockCopy>> SwapOut(const Request& req);

  // Swap-in: gives a swapped req new device blocks for its saved KV plus room for
  // num_new_tokens + num_lookahead_tokens more, and frees its host blocks. Returns (host, device)
  // copies to perform before the forward pass, or nullopt with nothing changed if the device
  // pool lacks room. num_new_tokens > 0.
  std::optional<std::vector<BlockCopy>> SwapIn(Request& req, int32_t num_new_tokens,
                                               int32_t num_lookahead_tokens = 0);

 private:
  // Uncaches blocks past the computed tokens (see Free), then frees the device table.
  void ReleaseDeviceBlocks(const Request& req);

  int32_t block_size_;
  int32_t max_model_len_;
  bool enable_prefix_caching_;
  BlockHasher hasher_;
  BlockPool pool_;
  SecondaryBlockPool secondary_pool_;
  std::unordered_map<std::string, std::vector<int32_t>> tables_;
  // Leading blocks of each table already in the prefix cache.
  std::unordered_map<std::string, int32_t> num_cached_blocks_;
  // Host blocks of swapped-out requests, in table order.
  std::unordered_map<std::string, std::vector<int32_t>> swapped_;
  PrefixCacheStats stats_;
};

}  // namespace pagellm
