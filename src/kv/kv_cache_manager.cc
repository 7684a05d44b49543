#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "pagellm/check.h"

namespace pagellm {

KvCacheManager::KvCacheManager(int32_t block_size, int32_t num_blocks, bool enable_prefix_caching,
                               int32_t max_model_len, int32_t num_secondary_blocks,
                               std::string_view key_space)
    : block_size_(block_size),
      max_model_len_(max_model_len),
      enable_prefix_caching_(enable_prefix_caching),
      hasher_(key_space),
      pool_(num_blocks, enable_prefix_caching),
      secondary_pool_(num_secondary_blocks) {
  CHECK(block_size >= 1 && block_size <= 256) << "block_size " << block_size;
  CHECK_GT(max_model_len, 0);
}

void KvCacheManager::UpdateBlockHashes(Request& req) const {
  if (!enable_prefix_caching_) return;
  hasher_.ExtendBlockHashes(req.all_token_ids(), block_size_, req.cache_salt, req.block_hashes);
}

ComputedBlocks KvCacheManager::GetComputedBlocks(Request& req) {
  ComputedBlocks result;
  if (!enable_prefix_caching_ || req.skip_prefix_cache) return result;
  UpdateBlockHashes(req);
  // Hits are block aligned, so capping at num_tokens - 1 may recompute a whole block when the
  // prompt is an exact multiple of the block size; that is the price of always having logits.
  const size_t max_blocks =
      std::min(static_cast<size_t>((req.num_tokens() - 1) / block_size_), req.block_hashes.size());
  for (size_t i = 0; i < max_blocks; ++i) {
    std::optional<int32_t> id = pool_.GetCachedBlock(req.block_hashes[i]);
    if (!id) break;
    result.block_ids.push_back(*id);
  }
  result.num_tokens = static_cast<int32_t>(result.block_ids.size()) * block_size_;
  return result;
}

std::optional<std::vector<int32_t>> KvCacheManager::AllocateSlots(
    Request& req, int32_t num_new_tokens, int32_t num_new_computed_tokens,
    std::span<const int32_t> new_computed_blocks, int32_t num_lookahead_tokens) {
  CHECK_GT(num_new_tokens, 0);
  CHECK_GE(num_lookahead_tokens, 0);
  CHECK_EQ(num_new_computed_tokens, static_cast<int32_t>(new_computed_blocks.size()) * block_size_);
  CHECK(!IsSwapped(req.id())) << "request " << req.id() << " must be swapped in first";
  UpdateBlockHashes(req);

  auto table_it = tables_.find(req.id());
  const bool first_allocation = table_it == tables_.end();
  const size_t table_size = first_allocation ? 0 : table_it->second.size();
  CHECK(new_computed_blocks.empty() || table_size == 0)
      << "prefix hits can only start a block table";

  const int32_t num_computed = req.num_computed_tokens + num_new_computed_tokens;
  const int32_t num_slots =
      std::min(num_computed + num_new_tokens + num_lookahead_tokens, max_model_len_);
  const int32_t num_to_allocate = std::max<int32_t>(
      0, NumBlocksFor(num_slots) - static_cast<int32_t>(table_size + new_computed_blocks.size()));
  // Hit blocks that are free sit in the free queue: touching them takes them out of it, so
  // they cannot also be counted as room for new blocks.
  const auto num_evictable_hits =
      static_cast<int32_t>(std::count_if(new_computed_blocks.begin(), new_computed_blocks.end(),
                                         [&](int32_t id) { return pool_.block(id).ref_cnt == 0; }));
  if (num_to_allocate > pool_.num_free_blocks() - num_evictable_hits) return std::nullopt;

  std::vector<int32_t>& table = tables_[req.id()];
  int32_t& num_cached = num_cached_blocks_[req.id()];
  if (!new_computed_blocks.empty()) {
    pool_.Touch(new_computed_blocks);
    table.assign(new_computed_blocks.begin(), new_computed_blocks.end());
    num_cached = static_cast<int32_t>(table.size());
  }
  std::optional<std::vector<int32_t>> new_blocks = pool_.GetNewBlocks(num_to_allocate);
  CHECK(new_blocks.has_value()) << "free-block count checked above";
  table.insert(table.end(), new_blocks->begin(), new_blocks->end());

  if (enable_prefix_caching_) {
    // Only tokens known for sure: speculative tokens may be rejected and must never be served.
    const int32_t num_tokens_to_cache = std::min(num_computed + num_new_tokens, req.num_tokens());
    const int32_t num_full = num_tokens_to_cache / block_size_;
    pool_.CacheFullBlocks(table, req.block_hashes, num_cached, num_full);
    num_cached = std::max(num_cached, num_full);
    if (first_allocation && !req.skip_prefix_cache) {
      const bool resumed = req.num_preemptions > 0;
      (resumed ? stats_.preempted_requests : stats_.requests) += 1;
      (resumed ? stats_.preempted_queries : stats_.queries) += req.num_tokens();
      (resumed ? stats_.preempted_hits : stats_.hits) += num_new_computed_tokens;
    }
  }
  return new_blocks;
}

void KvCacheManager::ReleaseDeviceBlocks(const Request& req) {
  auto it = tables_.find(req.id());
  if (it == tables_.end()) return;
  std::vector<int32_t>& table = it->second;
  const int32_t num_cached = num_cached_blocks_[req.id()];
  const int32_t num_computed_full = req.num_computed_tokens / block_size_;
  for (int32_t i = num_computed_full; i < num_cached; ++i) {
    // A block shared with another request was cached in an earlier step and is computed; only
    // this request's own blocks can be cached ahead of their computation.
    if (pool_.block(table[i]).ref_cnt == 1) pool_.UncacheBlock(table[i]);
  }
  std::reverse(table.begin(), table.end());
  pool_.FreeBlocks(table);
  tables_.erase(it);
  num_cached_blocks_.erase(req.id());
}

void KvCacheManager::Free(const Request& req) {
  ReleaseDeviceBlocks(req);
  auto it = swapped_.find(req.id());
  if (it != swapped_.end()) {
    secondary_pool_.Free(it->second);
    swapped_.erase(it);
  }
}

std::span<const int32_t> KvCacheManager::BlockTable(const std::string& request_id) const {
  auto it = tables_.find(request_id);
  if (it == tables_.end()) return {};
  return it->second;
}

std::optional<std::vector<BlockCopy>> KvCacheManager::SwapOut(const Request& req) {
  CHECK(!IsSwapped(req.id())) << "request " << req.id() << " is already swapped out";
  std::span<const int32_t> table = BlockTable(req.id());
  // Blocks past the computed tokens (allocated for this step's tokens) hold nothing worth
  // copying.
  const int32_t n = NumBlocksFor(req.num_computed_tokens);
  CHECK_LE(static_cast<size_t>(n), table.size()) << "computed tokens without blocks";
  std::optional<std::vector<int32_t>> host = secondary_pool_.Allocate(n);
  if (!host) return std::nullopt;
  std::vector<BlockCopy> copies;
  copies.reserve(n);
  for (int32_t i = 0; i < n; ++i) copies.push_back({table[i], (*host)[i]});
  ReleaseDeviceBlocks(req);
  swapped_[req.id()] = std::move(*host);
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
  if (NumBlocksFor(num_slots) > pool_.num_free_blocks()) return std::nullopt;

  std::vector<int32_t> host = std::move(it->second);
  swapped_.erase(it);
  std::optional<std::vector<int32_t>> device =
      pool_.GetNewBlocks(static_cast<int32_t>(host.size()));
  CHECK(device.has_value());
  std::vector<BlockCopy> copies;
  copies.reserve(host.size());
  for (size_t i = 0; i < host.size(); ++i) copies.push_back({host[i], (*device)[i]});
  secondary_pool_.Free(host);
  tables_[req.id()] = std::move(*device);
  // The restored blocks are re-cached by AllocateSlots (their KV is in place once the copies
  // run, before the forward pass).
  num_cached_blocks_[req.id()] = 0;
  CHECK(AllocateSlots(req, num_new_tokens, 0, {}, num_lookahead_tokens).has_value());
  return copies;
}

}  // namespace pagellm
