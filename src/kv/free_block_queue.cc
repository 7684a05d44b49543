#include "kv/free_block_queue.h"

#include "pagellm/check.h"

namespace pagellm {
namespace {
constexpr int32_t kNotLinked = -1;
}  // namespace

FreeBlockQueue::FreeBlockQueue(int32_t capacity)
    : capacity_(capacity), prev_(capacity + 2, kNotLinked), next_(capacity + 2, kNotLinked) {
  CHECK_GE(capacity, 0);
  next_[head()] = tail();
  prev_[tail()] = head();
  for (int32_t id = 0; id < capacity; ++id) Append(id);
}

void FreeBlockQueue::CheckId(int32_t id) const {
  CHECK(id >= 0 && id < capacity_) << "block id " << id << " outside [0, " << capacity_ << ")";
}

bool FreeBlockQueue::Contains(int32_t id) const {
  CheckId(id);
  return next_[id] != kNotLinked;
}

int32_t FreeBlockQueue::Front() const {
  CHECK_GT(size_, 0) << "Front() on an empty free-block queue";
  return next_[head()];
}

int32_t FreeBlockQueue::PopFront() {
  const int32_t id = Front();
  Remove(id);
  return id;
}

std::vector<int32_t> FreeBlockQueue::PopFrontN(int32_t n) {
  CHECK(n >= 0 && n <= size_) << "popping " << n << " of " << size_ << " free blocks";
  std::vector<int32_t> ids;
  ids.reserve(n);
  for (int32_t i = 0; i < n; ++i) ids.push_back(PopFront());
  return ids;
}

void FreeBlockQueue::Remove(int32_t id) {
  CHECK(Contains(id)) << "block " << id << " is not in the free queue";
  const int32_t p = prev_[id];
  const int32_t n = next_[id];
  next_[p] = n;
  prev_[n] = p;
  prev_[id] = kNotLinked;
  next_[id] = kNotLinked;
  --size_;
}

void FreeBlockQueue::Append(int32_t id) {
  CHECK(!Contains(id)) << "block " << id << " is already in the free queue";
  const int32_t last = prev_[tail()];
  next_[last] = id;
  prev_[id] = last;
  next_[id] = tail();
  prev_[tail()] = id;
  ++size_;
}

void FreeBlockQueue::AppendN(std::span<const int32_t> ids) {
  for (int32_t id : ids) Append(id);
}

std::vector<int32_t> FreeBlockQueue::ToVector() const {
  std::vector<int32_t> ids;
  ids.reserve(size_);
  for (int32_t id = next_[head()]; id != tail(); id = next_[id]) ids.push_back(id);
  return ids;
}

}  // namespace pagellm
