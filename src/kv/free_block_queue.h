// FreeBlockQueue: the LRU list of free KV blocks, intrusive over block ids.
//
// Eviction order is the whole prefix-caching policy: the front is the block that has been free
// the longest (popped first by allocation), the back the most recently freed. A cached block that
// is hit again must leave the list from the middle, so every operation is O(1): links live in two
// arrays indexed by block id, with a sentinel head and tail at ids `capacity` and `capacity + 1`.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagellm {

class FreeBlockQueue {
 public:
  // All ids 0 .. capacity-1 start in the queue, in ascending order (so allocation of a fresh
  // pool hands out low ids first, which keeps tests and logs predictable).
  explicit FreeBlockQueue(int32_t capacity);

  int32_t capacity() const { return capacity_; }
  int32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool Contains(int32_t id) const;

  // Least recently freed block; the queue must not be empty.
  int32_t Front() const;
  int32_t PopFront();
  // Pops n blocks from the front; the queue must hold at least n.
  std::vector<int32_t> PopFrontN(int32_t n);
  // Unlinks a block from anywhere in the queue; it must be in the queue.
  void Remove(int32_t id);
  // Appends at the back (most recently freed); the block must not be in the queue.
  void Append(int32_t id);
  void AppendN(std::span<const int32_t> ids);

  // Ids from front to back: for tests and debugging, O(size).
  std::vector<int32_t> ToVector() const;

 private:
  int32_t head() const { return capacity_; }
  int32_t tail() const { return capacity_ + 1; }
  void CheckId(int32_t id) const;

  int32_t capacity_;
  int32_t size_ = 0;
  // prev_[id] / next_[id]; kNotLinked marks a block that is not in the queue.
  std::vector<int32_t> prev_;
  std::vector<int32_t> next_;
};

}  // namespace pagellm
