#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "pagellm/check.h"

namespace pagellm {

KvCacheManager::KvCacheManager(int32_t block_size, int32_t num_blocks, bool enable_prefix_caching,
                               int32_t max_model_len, int32_t num_secondary_blocks,
                               std::string_view key_space, std::vector<int32_t> group_windows)
    : block_size_(block_size),
      group_windows_(group_windows.empty() ? std::vector<int32_t>{0} : std::move(group_windows)),
      max_model_len_(max_model_len),
      enable_prefix_caching_(enable_prefix_caching),
      hasher_(key_space),
      pool_(num_blocks, enable_prefix_caching),
      secondary_pool_(num_secondary_blocks) {
  CHECK(block_size >= 1 && block_size <= 256) << "block_size " << block_size;
  CHECK_GT(max_model_len, 0);
  for (int32_t w : group_windows_) CHECK_GE(w, 0);
}

void KvCacheManager::UpdateBlockHashes(Request& req) const {
  if (!enable_prefix_caching_) return;
  hasher_.ExtendBlockHashes(req.all_token_ids(), block_size_, req.cache_salt, req.block_hashes);
}

BlockHash KvCacheManager::GroupHash(const Request& req, size_t i, int g) const {
  BlockHash h = req.block_hashes[i];
  // Groups hold different layers of the same tokens, so each needs its own key. The tweak is a
  // bijection of the hash for a fixed group: two keys collide only if two SHA-256 values differ
  // by exactly this pattern.
  if (g > 0)
    for (int b = 0; b < 4; ++b) h[h.size() - 1 - b] ^= static_cast<uint8_t>((g >> (8 * b)) & 0xff);
  return h;
}

int32_t KvCacheManager::FirstVisibleBlock(int32_t window, int32_t pos) const {
  if (window == 0) return 0;
  // The attention kernel lets a query at pos see keys [pos - window + 1, pos].
  return std::max(0, pos - window + 1) / block_size_;
}

ComputedBlocks KvCacheManager::GetComputedBlocks(Request& req) {
  ComputedBlocks result;
  if (!enable_prefix_caching_ || req.skip_prefix_cache) return result;
  UpdateBlockHashes(req);
  // Hits are block aligned, so capping at num_tokens - 1 may recompute a whole block when the
  // prompt is an exact multiple of the block size; that is the price of always having logits.
  const size_t max_blocks =
      std::min(static_cast<size_t>((req.num_tokens() - 1) / block_size_), req.block_hashes.size());
  const int n_groups = num_groups();
  if (n_groups == 1 && group_windows_[0] == 0) {
    for (size_t i = 0; i < max_blocks; ++i) {
      std::optional<int32_t> id = pool_.GetCachedBlock(req.block_hashes[i]);
      if (!id) break;
      result.block_ids.push_back(*id);
    }
    result.num_tokens = static_cast<int32_t>(result.block_ids.size()) * block_size_;
    return result;
  }
  // Full groups: the longest prefix every one of them has cached; window groups: their lookups
  // (0 = miss) over that prefix.
  std::vector<std::vector<int32_t>> found(n_groups);
  size_t n = max_blocks;
  for (size_t i = 0; i < n; ++i) {
    for (int g = 0; g < n_groups && i < n; ++g) {
      std::optional<int32_t> id = pool_.GetCachedBlock(GroupHash(req, i, g));
      if (!id && group_windows_[g] == 0) n = i;
      if (i < n) found[g].push_back(id.value_or(BlockPool::kNullBlockId));
    }
  }
  for (auto& f : found) f.resize(n);
  // Largest hit length (in blocks) at which every window group has the blocks its window sees.
  auto window_ok = [&](size_t len) {
    for (int g = 0; g < n_groups; ++g) {
      if (group_windows_[g] == 0) continue;
      const int32_t pos = static_cast<int32_t>(len) * block_size_;
      for (size_t i = FirstVisibleBlock(group_windows_[g], pos); i < len; ++i)
        if (found[g][i] == BlockPool::kNullBlockId) return false;
    }
    return true;
  };
  while (n > 0 && !window_ok(n)) --n;
  result.num_tokens = static_cast<int32_t>(n) * block_size_;
  for (int g = 0; g < n_groups; ++g) {
    std::vector<int32_t> ids(found[g].begin(), found[g].begin() + n);
    const int32_t first = FirstVisibleBlock(group_windows_[g], result.num_tokens);
    std::fill(ids.begin(), ids.begin() + std::min<size_t>(first, n), BlockPool::kNullBlockId);
    if (g == 0) {
      result.block_ids = std::move(ids);
    } else {
      result.other_groups.push_back(std::move(ids));
    }
  }
  return result;
}

void KvCacheManager::FreeBlocksOutsideWindows(Tables& tables, int32_t num_computed_tokens) {
  for (int g = 0; g < num_groups(); ++g) {
    if (group_windows_[g] == 0) continue;
    std::vector<int32_t>& table = tables[g];
    const int32_t end = std::min<int32_t>(FirstVisibleBlock(group_windows_[g], num_computed_tokens),
                                          static_cast<int32_t>(table.size()));
    // Entries before the first null one met going down were freed in earlier steps. Freed in
    // reverse, as Free does, so the later (less shareable) blocks are evicted first.
    std::vector<int32_t> freed;
    for (int32_t i = end - 1; i >= 0 && table[i] != BlockPool::kNullBlockId; --i) {
      freed.push_back(table[i]);
      table[i] = BlockPool::kNullBlockId;
    }
    pool_.FreeBlocks(freed);
  }
}

std::optional<std::vector<int32_t>> KvCacheManager::AllocateSlots(
    Request& req, int32_t num_new_tokens, int32_t num_new_computed_tokens,
    std::span<const int32_t> new_computed_blocks, int32_t num_lookahead_tokens) {
  CHECK(new_computed_blocks.empty() || num_groups() == 1)
      << "prefix hits of several KV cache groups come as a ComputedBlocks";
  ComputedBlocks hit;
  hit.block_ids.assign(new_computed_blocks.begin(), new_computed_blocks.end());
  hit.num_tokens = num_new_computed_tokens;
  return AllocateSlots(req, num_new_tokens, hit, num_lookahead_tokens);
}

std::optional<std::vector<int32_t>> KvCacheManager::AllocateSlots(Request& req,
                                                                  int32_t num_new_tokens,
                                                                  const ComputedBlocks& hit,
                                                                  int32_t num_lookahead_tokens) {
  CHECK_GT(num_new_tokens, 0);
  CHECK_GE(num_lookahead_tokens, 0);
  const int n_groups = num_groups();
  const int32_t num_new_computed_tokens = hit.num_tokens;
  CHECK_EQ(num_new_computed_tokens, static_cast<int32_t>(hit.block_ids.size()) * block_size_);
  CHECK(hit.other_groups.empty() || static_cast<int>(hit.other_groups.size()) == n_groups - 1);
  CHECK(!IsSwapped(req.id())) << "request " << req.id() << " must be swapped in first";
  UpdateBlockHashes(req);
  auto hit_blocks = [&](int g) -> std::span<const int32_t> {
    if (g == 0) return hit.block_ids;
    if (hit.other_groups.empty()) return {};
    return hit.other_groups[g - 1];
  };

  auto table_it = tables_.find(req.id());
  const bool first_allocation = table_it == tables_.end();
  CHECK(hit.block_ids.empty() || first_allocation) << "prefix hits can only start a block table";
  const int32_t num_computed = req.num_computed_tokens + num_new_computed_tokens;
  // Blocks no query of this step or later can read go back first, so they count as room.
  if (!first_allocation) FreeBlocksOutsideWindows(table_it->second, num_computed);

  const int32_t num_slots =
      std::min(num_computed + num_new_tokens + num_lookahead_tokens, max_model_len_);
  std::vector<int32_t> num_to_allocate(n_groups);
  int32_t total_to_allocate = 0;
  int32_t num_evictable_hits = 0;
  for (int g = 0; g < n_groups; ++g) {
    const std::span<const int32_t> hits = hit_blocks(g);
    const size_t table_size = first_allocation ? 0 : table_it->second[g].size();
    num_to_allocate[g] = std::max<int32_t>(
        0, NumBlocksFor(num_slots) - static_cast<int32_t>(table_size + hits.size()));
    total_to_allocate += num_to_allocate[g];
    // Hit blocks that are free sit in the free queue: touching them takes them out of it, so
    // they cannot also be counted as room for new blocks.
    num_evictable_hits +=
        static_cast<int32_t>(std::count_if(hits.begin(), hits.end(), [&](int32_t id) {
          return id != BlockPool::kNullBlockId && pool_.block(id).ref_cnt == 0;
        }));
  }
  if (total_to_allocate > pool_.num_free_blocks() - num_evictable_hits) return std::nullopt;

  Tables& tables = tables_[req.id()];
  std::vector<int32_t>& num_cached = num_cached_blocks_[req.id()];
  if (first_allocation) {
    tables.resize(n_groups);
    num_cached.assign(n_groups, 0);
  }
  // Every group's hits leave the free queue before any new block is taken from it: a free
  // cached block hit by one group must not be handed out to another.
  for (int g = 0; g < n_groups; ++g) {
    const std::span<const int32_t> hits = hit_blocks(g);
    if (hits.empty()) continue;
    std::vector<int32_t> present;
    for (int32_t id : hits)
      if (id != BlockPool::kNullBlockId) present.push_back(id);
    pool_.Touch(present);
    tables[g].assign(hits.begin(), hits.end());
    num_cached[g] = static_cast<int32_t>(tables[g].size());
  }
  std::vector<int32_t> all_new;
  for (int g = 0; g < n_groups; ++g) {
    std::optional<std::vector<int32_t>> new_blocks = pool_.GetNewBlocks(num_to_allocate[g]);
    CHECK(new_blocks.has_value()) << "free-block count checked above";
    tables[g].insert(tables[g].end(), new_blocks->begin(), new_blocks->end());
    all_new.insert(all_new.end(), new_blocks->begin(), new_blocks->end());
  }
  // A window group's hit adopted before the window was applied (first allocation) or the
  // step's computed tokens: drop what the window no longer sees.
  if (first_allocation) FreeBlocksOutsideWindows(tables, num_computed);

  if (enable_prefix_caching_) {
    // Only tokens known for sure: speculative tokens may be rejected and must never be served.
    const int32_t num_tokens_to_cache = std::min(num_computed + num_new_tokens, req.num_tokens());
    const int32_t num_full = num_tokens_to_cache / block_size_;
    for (int g = 0; g < n_groups; ++g) {
      if (g == 0 && group_windows_[0] == 0) {
        pool_.CacheFullBlocks(tables[0], req.block_hashes, num_cached[0], num_full);
      } else {
        for (int32_t i = num_cached[g]; i < num_full; ++i)
          if (tables[g][i] != BlockPool::kNullBlockId)
            pool_.CacheBlock(tables[g][i], GroupHash(req, i, g));
      }
      num_cached[g] = std::max(num_cached[g], num_full);
    }
    if (first_allocation && !req.skip_prefix_cache) {
      const bool resumed = req.num_preemptions > 0;
      (resumed ? stats_.preempted_requests : stats_.requests) += 1;
      (resumed ? stats_.preempted_queries : stats_.queries) += req.num_tokens();
      (resumed ? stats_.preempted_hits : stats_.hits) += num_new_computed_tokens;
    }
  }
  return all_new;
}

void KvCacheManager::ReleaseDeviceBlocks(const Request& req) {
  auto it = tables_.find(req.id());
  if (it == tables_.end()) return;
  const std::vector<int32_t>& num_cached = num_cached_blocks_[req.id()];
  const int32_t num_computed_full = req.num_computed_tokens / block_size_;
  for (int g = 0; g < num_groups(); ++g) {
    std::vector<int32_t>& table = it->second[g];
    for (int32_t i = num_computed_full; i < num_cached[g]; ++i) {
      // A block shared with another request was cached in an earlier step and is computed; only
      // this request's own blocks can be cached ahead of their computation.
      if (table[i] != BlockPool::kNullBlockId && pool_.block(table[i]).ref_cnt == 1)
        pool_.UncacheBlock(table[i]);
    }
  }
  // Tail blocks first, group by group from the last (vLLM frees a hybrid request's groups so).
  for (int g = num_groups() - 1; g >= 0; --g) {
    std::vector<int32_t>& table = it->second[g];
    std::erase(table, BlockPool::kNullBlockId);
    std::reverse(table.begin(), table.end());
    pool_.FreeBlocks(table);
  }
  tables_.erase(it);
  num_cached_blocks_.erase(req.id());
}

void KvCacheManager::Free(const Request& req) {
  ReleaseDeviceBlocks(req);
  auto it = swapped_.find(req.id());
  if (it != swapped_.end()) {
    for (std::vector<int32_t>& host : it->second) {
      std::erase(host, -1);
      secondary_pool_.Free(host);
    }
    swapped_.erase(it);
  }
}

std::span<const int32_t> KvCacheManager::BlockTable(const std::string& request_id) const {
  auto it = tables_.find(request_id);
  if (it == tables_.end()) return {};
  return it->second[0];
}

std::span<const std::vector<int32_t>> KvCacheManager::BlockTables(
    const std::string& request_id) const {
  auto it = tables_.find(request_id);
  if (it == tables_.end()) return {};
  return it->second;
}

int32_t KvCacheManager::NumBlocksHeld(const std::string& request_id) const {
  int32_t n = 0;
  for (const std::vector<int32_t>& table : BlockTables(request_id))
    n += static_cast<int32_t>(
        std::count_if(table.begin(), table.end(), [](int32_t id) { return id != 0; }));
  return n;
}

std::optional<std::vector<BlockCopy>> KvCacheManager::SwapOut(const Request& req) {
  CHECK(!IsSwapped(req.id())) << "request " << req.id() << " is already swapped out";
  std::span<const std::vector<int32_t>> tables = BlockTables(req.id());
  CHECK(!tables.empty()) << "request " << req.id() << " holds no blocks";
  // Blocks past the computed tokens (allocated for this step's tokens) hold nothing worth
  // copying; null entries (outside a window) hold nothing at all.
  const int32_t n = NumBlocksFor(req.num_computed_tokens);
  int32_t num_saved = 0;
  for (const std::vector<int32_t>& table : tables) {
    CHECK_LE(static_cast<size_t>(n), table.size()) << "computed tokens without blocks";
    num_saved += static_cast<int32_t>(
        std::count_if(table.begin(), table.begin() + n, [](int32_t id) { return id != 0; }));
  }
  std::optional<std::vector<int32_t>> host = secondary_pool_.Allocate(num_saved);
  if (!host) return std::nullopt;
  std::vector<BlockCopy> copies;
  copies.reserve(num_saved);
  Tables saved(tables.size());
  size_t next = 0;
  for (size_t g = 0; g < tables.size(); ++g) {
    for (int32_t i = 0; i < n; ++i) {
      if (tables[g][i] == BlockPool::kNullBlockId) {
        saved[g].push_back(-1);
        continue;
      }
      copies.push_back({tables[g][i], (*host)[next]});
      saved[g].push_back((*host)[next++]);
    }
  }
  ReleaseDeviceBlocks(req);
  swapped_[req.id()] = std::move(saved);
  return copies;
}

std::optional<std::vector<BlockCopy>> KvCacheManager::SwapIn(Request& req, int32_t num_new_tokens,
                                                             int32_t num_lookahead_tokens) {
  CHECK_GT(num_new_tokens, 0);
  auto it = swapped_.find(req.id());
  CHECK(it != swapped_.end()) << "request " << req.id() << " is not swapped out";
  CHECK(!HasBlocks(req.id()));
  // All-or-nothing: room for the saved blocks and this step's growth, checked up front so the
  // AllocateSlots below cannot fail halfway.
  const int32_t num_slots =
      std::min(req.num_computed_tokens + num_new_tokens + num_lookahead_tokens, max_model_len_);
  int32_t needed = 0;
  for (const std::vector<int32_t>& host : it->second) {
    const auto num_saved =
        static_cast<int32_t>(host.size() - std::count(host.begin(), host.end(), -1));
    needed += num_saved +
              std::max<int32_t>(0, NumBlocksFor(num_slots) - static_cast<int32_t>(host.size()));
  }
  if (needed > pool_.num_free_blocks()) return std::nullopt;

  Tables host = std::move(it->second);
  swapped_.erase(it);
  std::vector<BlockCopy> copies;
  Tables& tables = tables_[req.id()];
  tables.resize(host.size());
  for (size_t g = 0; g < host.size(); ++g) {
    const auto num_saved = static_cast<int32_t>(
        std::count_if(host[g].begin(), host[g].end(), [](int32_t id) { return id >= 0; }));
    std::optional<std::vector<int32_t>> device = pool_.GetNewBlocks(num_saved);
    CHECK(device.has_value());
    size_t next = 0;
    for (int32_t h : host[g]) {
      if (h < 0) {
        tables[g].push_back(BlockPool::kNullBlockId);
        continue;
      }
      copies.push_back({h, (*device)[next]});
      tables[g].push_back((*device)[next++]);
    }
    std::erase(host[g], -1);
    secondary_pool_.Free(host[g]);
  }
  // The restored blocks are re-cached by AllocateSlots (their KV is in place once the copies
  // run, before the forward pass).
  num_cached_blocks_[req.id()].assign(host.size(), 0);
  CHECK(AllocateSlots(req, num_new_tokens, 0, {}, num_lookahead_tokens).has_value());
  return copies;
}

}  // namespace pagellm
