#include "kv/block_pool.h"

#include <algorithm>

#include "pagellm/check.h"

namespace pagellm {

BlockPool::BlockPool(int32_t num_blocks, bool enable_caching)
    : enable_caching_(enable_caching), free_queue_(num_blocks) {
  CHECK_GE(num_blocks, 1) << "a block pool needs at least the null block";
  blocks_.resize(num_blocks);
  for (int32_t id = 0; id < num_blocks; ++id) blocks_[id].id = id;
  // The null block leaves the free queue for good; its ref_cnt stays 0 and nothing tracks it.
  CHECK_EQ(free_queue_.PopFront(), kNullBlockId);
}

const KvCacheBlock& BlockPool::block(int32_t id) const {
  CHECK(id >= 0 && id < num_blocks()) << "block id " << id;
  return blocks_[id];
}

KvCacheBlock& BlockPool::mutable_block(int32_t id) {
  CHECK(id > kNullBlockId && id < num_blocks()) << "block id " << id << " (0 is the null block)";
  return blocks_[id];
}

double BlockPool::Usage() const {
  if (num_usable_blocks() == 0) return 0.0;
  return 1.0 - static_cast<double>(num_free_blocks()) / num_usable_blocks();
}

void BlockPool::EvictCachedHash(KvCacheBlock& block) {
  if (!block.hash) return;
  auto it = cached_.find(*block.hash);
  CHECK(it != cached_.end()) << "block " << block.id << " has a hash missing from the index";
  std::vector<int32_t>& ids = it->second;
  auto pos = std::find(ids.begin(), ids.end(), block.id);
  CHECK(pos != ids.end()) << "block " << block.id << " missing under its hash";
  ids.erase(pos);
  if (ids.empty()) cached_.erase(it);
  block.hash.reset();
  --num_cached_blocks_;
}

std::optional<std::vector<int32_t>> BlockPool::GetNewBlocks(int32_t n) {
  CHECK_GE(n, 0);
  if (n > num_free_blocks()) return std::nullopt;
  std::vector<int32_t> ids = free_queue_.PopFrontN(n);
  for (int32_t id : ids) {
    KvCacheBlock& b = mutable_block(id);
    CHECK_EQ(b.ref_cnt, 0) << "block " << id << " in the free queue";
    if (b.hash) {
      EvictCachedHash(b);
      ++num_evictions_;
    }
    b.ref_cnt = 1;
  }
  return ids;
}

void BlockPool::Touch(std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    KvCacheBlock& b = mutable_block(id);
    if (b.ref_cnt == 0) free_queue_.Remove(id);
    ++b.ref_cnt;
  }
}

void BlockPool::FreeBlocks(std::span<const int32_t> ordered_ids) {
  for (int32_t id : ordered_ids) {
    KvCacheBlock& b = mutable_block(id);
    CHECK_GT(b.ref_cnt, 0) << "double free of block " << id;
    if (--b.ref_cnt == 0) free_queue_.Append(id);
  }
}

void BlockPool::CacheFullBlocks(std::span<const int32_t> block_ids,
                                std::span<const BlockHash> block_hashes, int32_t num_cached_blocks,
                                int32_t num_full_blocks) {
  if (!enable_caching_ || num_full_blocks <= num_cached_blocks) return;
  CHECK_LE(static_cast<size_t>(num_full_blocks), block_ids.size());
  CHECK_LE(static_cast<size_t>(num_full_blocks), block_hashes.size())
      << "block hashes must be computed before caching";
  for (int32_t i = num_cached_blocks; i < num_full_blocks; ++i)
    CacheBlock(block_ids[i], block_hashes[i]);
}

void BlockPool::CacheBlock(int32_t id, const BlockHash& hash) {
  if (!enable_caching_) return;
  KvCacheBlock& b = mutable_block(id);
  CHECK(!b.hash) << "block " << b.id << " is already cached";
  b.hash = hash;
  cached_[hash].push_back(b.id);
  ++num_cached_blocks_;
}

void BlockPool::UncacheBlock(int32_t id) {
  EvictCachedHash(mutable_block(id));
}

std::optional<int32_t> BlockPool::GetCachedBlock(const BlockHash& hash) const {
  auto it = cached_.find(hash);
  if (it == cached_.end()) return std::nullopt;
  return it->second.front();
}

bool BlockPool::ResetPrefixCache() {
  if (num_free_blocks() != num_usable_blocks()) return false;
  for (KvCacheBlock& b : blocks_) b.hash.reset();
  cached_.clear();
  num_cached_blocks_ = 0;
  return true;
}

}  // namespace pagellm
