// KvCacheManager: per-request block tables on top of the BlockPool, prefix-cache lookups, and
// the swap path to a secondary (host) pool. Pure bookkeeping: it never touches KV data; copies
// it decides on are returned as lists for the executor to perform.
//
// Mirrors vLLM V1's KVCacheManager, with its hybrid allocator for sliding-window layers:
//  * KV cache groups (kv/kv_cache_groups.h): one block table per group and request, all drawn
//    from one pool. One full-attention group is the plain single-table manager.
//  * GetComputedBlocks: longest cached prefix, block aligned, capped at num_tokens - 1; a
//    window group only needs (and only takes) the blocks its window still sees at the hit
//    length, so a hit is usable only if those blocks are cached.
//  * AllocateSlots: first frees the blocks of window groups that fell fully out of the window
//    (their table entries become the null block 0; cached ones stay hittable in the free
//    queue), then grows every table all-or-nothing; caches newly full blocks up to the
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
#include "kv/kv_cache_groups.h"
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
  std::vector<int32_t> block_ids;  // cached prefix blocks of group 0, in order
  int32_t num_tokens = 0;          // block_ids.size() * block_size
  // Groups 1.. (empty with one group), each num_tokens / block_size entries; a window group's
  // entries before its window are the null block 0.
  std::vector<std::vector<int32_t>> other_groups;
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
  // group_windows: the sliding window of each KV cache group (KvCacheGroups::windows(); 0 =
  // full attention); empty means one full-attention group.
  KvCacheManager(int32_t block_size, int32_t num_blocks, bool enable_prefix_caching,
                 int32_t max_model_len, int32_t num_secondary_blocks = 0,
                 std::string_view key_space = "", std::vector<int32_t> group_windows = {});

  int32_t block_size() const { return block_size_; }
  int32_t max_model_len() const { return max_model_len_; }
  bool enable_prefix_caching() const { return enable_prefix_caching_; }
  bool swap_enabled() const { return secondary_pool_.num_blocks() > 0; }
  const BlockPool& block_pool() const { return pool_; }
  const SecondaryBlockPool& secondary_pool() const { return secondary_pool_; }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  double Usage() const { return pool_.Usage(); }
  const PrefixCacheStats& prefix_cache_stats() const { return stats_; }
  int num_groups() const { return static_cast<int>(group_windows_.size()); }
  const std::vector<int32_t>& group_windows() const { return group_windows_; }
  // Blocks one table needs to hold num_tokens tokens.
  int32_t NumBlocksFor(int32_t num_tokens) const {
    return (num_tokens + block_size_ - 1) / block_size_;
  }
  // Pool blocks a request of num_tokens tokens holds at most in a step of step_tokens tokens,
  // all groups (BlocksPerRequest of kv_cache_groups.h).
  int64_t NumPoolBlocksForRequest(int32_t num_tokens, int32_t step_tokens = 1) const {
    return BlocksPerRequest(group_windows_, block_size_, num_tokens, step_tokens);
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
  // With several groups, the new blocks of every group are returned back to back.
  std::optional<std::vector<int32_t>> AllocateSlots(
      Request& req, int32_t num_new_tokens, int32_t num_new_computed_tokens = 0,
      std::span<const int32_t> new_computed_blocks = {}, int32_t num_lookahead_tokens = 0);
  // The same with a GetComputedBlocks result (every group's hit blocks).
  std::optional<std::vector<int32_t>> AllocateSlots(Request& req, int32_t num_new_tokens,
                                                    const ComputedBlocks& hit,
                                                    int32_t num_lookahead_tokens);

  // Releases everything req holds, device table (reverse order) or swapped host blocks. Blocks
  // cached for tokens beyond req.num_computed_tokens (scheduled this step but never computed:
  // a victim preempted in the step that filled them) lose their hash first, so the prefix cache
  // only ever serves KV that was written. Call before resetting num_computed_tokens.
  void Free(const Request& req);

  // Device block table of group 0 (empty if req holds none).
  std::span<const int32_t> BlockTable(const std::string& request_id) const;
  // Every group's table (empty span if req holds none); window groups have the null block 0
  // for blocks their window no longer sees.
  std::span<const std::vector<int32_t>> BlockTables(const std::string& request_id) const;
  // Pool blocks req holds now, all groups (null entries not counted).
  int32_t NumBlocksHeld(const std::string& request_id) const;
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
  using Tables = std::vector<std::vector<int32_t>>;  // [group] -> block ids

  // Uncaches blocks past the computed tokens (see Free), then frees the device table.
  void ReleaseDeviceBlocks(const Request& req);
  // Frees the blocks of window groups whose every position is before the first position a
  // query at num_computed_tokens can see; their entries become the null block.
  void FreeBlocksOutsideWindows(Tables& tables, int32_t num_computed_tokens);
  // First block a query at `pos` still reads in a group with `window` (0: full attention).
  int32_t FirstVisibleBlock(int32_t window, int32_t pos) const;
  // The prefix-cache key of block i of req in group g (group 0: the block hash itself).
  BlockHash GroupHash(const Request& req, size_t i, int g) const;

  int32_t block_size_;
  std::vector<int32_t> group_windows_;
  int32_t max_model_len_;
  bool enable_prefix_caching_;
  BlockHasher hasher_;
  BlockPool pool_;
  SecondaryBlockPool secondary_pool_;
  std::unordered_map<std::string, Tables> tables_;
  // Leading blocks of each table already in the prefix cache (null entries included), per group.
  std::unordered_map<std::string, std::vector<int32_t>> num_cached_blocks_;
  // Host blocks of swapped-out requests, per group in table order; -1 where the device table
  // had the null block.
  std::unordered_map<std::string, Tables> swapped_;
  PrefixCacheStats stats_;
};

}  // namespace pagellm
