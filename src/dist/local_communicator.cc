#include "dist/local_communicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "fmt/format.h"
#include "pagellm/check.h"

namespace pagellm {
namespace {

// Every collective is one exchange: each rank deposits its bytes, waits until all have, reads
// what it needs, and waits until all have read before the area is reused.
class LocalGroup {
 public:
  LocalGroup(int size, std::chrono::milliseconds timeout)
      : size_(size), timeout_(timeout), slots_(size) {}

  // Deposits `mine` as rank `rank`'s part of the current exchange and calls read(slots) once
  // every rank has deposited; returns after every rank has read.
  template <typename Read>
  Status Exchange(int rank, std::vector<uint8_t> mine, bool wait_forever, Read read) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!aborted_.ok()) return aborted_;
    slots_[rank] = std::move(mine);
    RETURN_IF_ERROR(Arrive(lock, &deposited_, &deposit_round_, wait_forever));
    read(slots_);
    return Arrive(lock, &read_, &read_round_, false);
  }

  // Point to point: one queue of messages per (from, to); a send never waits.
  void Post(int from, int to, std::vector<uint8_t> bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    mailbox_[{from, to}].push_back(std::move(bytes));
    cv_.notify_all();
  }
  Status Take(int from, int to, std::chrono::milliseconds timeout, std::vector<uint8_t>* bytes) {
    std::unique_lock<std::mutex> lock(mu_);
    std::deque<std::vector<uint8_t>>& queue = mailbox_[{from, to}];
    if (!aborted_.ok()) return aborted_;
    if (!cv_.wait_for(lock, timeout, [&] { return !queue.empty() || !aborted_.ok(); }))
      return UnavailableError(
          fmt::format("pipeline-parallel receive: rank {} sent nothing to rank {} within {} ms",
                      from, to, timeout.count()));
    if (queue.empty()) return aborted_;  // woken by Abort
    *bytes = std::move(queue.front());
    queue.pop_front();
    return Status::Ok();
  }

  // The group of `size` ranks made by split number `split` for `color`: the first member to ask
  // creates it, the others find it.
  std::shared_ptr<LocalGroup> SubGroup(int64_t split, int color, int size) {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<LocalGroup>& g = subgroups_[{split, color}];
    if (g == nullptr) g = std::make_shared<LocalGroup>(size, timeout_);
    return g;
  }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // Every collective waiting now or started later returns `why` (the first abort's) on every
  // rank; the group cannot be used again.
  void Abort(const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.ok()) aborted_ = why;
    cv_.notify_all();
  }

 private:
  // A barrier over `count` (generation `round`): the last rank to arrive releases the others.
  Status Arrive(std::unique_lock<std::mutex>& lock, int* count, int64_t* round, bool wait_forever) {
    const int64_t my_round = *round;
    if (++*count == size_) {
      *count = 0;
      ++*round;
      cv_.notify_all();
      return Status::Ok();
    }
    auto done = [&] { return *round != my_round || !aborted_.ok(); };
    if (wait_forever) {
      cv_.wait(lock, done);
    } else if (!cv_.wait_for(lock, timeout_, done)) {
      --*count;
      return UnavailableError(
          fmt::format("tensor-parallel collective: {} of {} ranks did not arrive within {} ms",
                      size_ - *count - 1, size_, timeout_.count()));
    }
    if (*round == my_round) return aborted_;  // woken by Abort before the round completed
    return Status::Ok();
  }

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<uint8_t>> slots_;
  int deposited_ = 0, read_ = 0;
  int64_t deposit_round_ = 0, read_round_ = 0;
  std::map<std::pair<int, int>, std::deque<std::vector<uint8_t>>> mailbox_;
  std::map<std::pair<int64_t, int>, std::shared_ptr<LocalGroup>> subgroups_;
  Status aborted_;  // Ok until Abort
};

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int rank, int size)
      : group_(std::move(group)), rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AllReduceSum(float* x, int64_t n) override {
    std::vector<uint8_t> mine(reinterpret_cast<const uint8_t*>(x),
                              reinterpret_cast<const uint8_t*>(x + n));
    std::vector<float> parts(static_cast<size_t>(n) * size_);
    Status bad_size = Status::Ok();
    RETURN_IF_ERROR(group_->Exchange(rank_, std::move(mine), false, [&](const auto& slots) {
      for (int r = 0; r < size_; ++r) {
        if (slots[r].size() != static_cast<size_t>(n) * sizeof(float)) {
          bad_size = InvalidArgumentError("AllReduceSum: ranks passed different lengths");
          return;
        }
        std::memcpy(parts.data() + int64_t{r} * n, slots[r].data(), slots[r].size());
      }
    }));
    RETURN_IF_ERROR(bad_size);
    SumInRankOrder(parts.data(), size_, n, x);
    return Status::Ok();
  }

  Status Broadcast(std::vector<uint8_t>* bytes, bool wait_forever) override {
    std::vector<uint8_t> mine = rank_ == 0 ? *bytes : std::vector<uint8_t>();
    return group_->Exchange(rank_, std::move(mine), wait_forever, [&](const auto& slots) {
      if (rank_ != 0) *bytes = slots[0];
    });
  }

  Status GatherToRoot(std::span<const uint8_t> mine,
                      std::vector<std::vector<uint8_t>>* all) override {
    return group_->Exchange(rank_, std::vector<uint8_t>(mine.begin(), mine.end()), false,
                            [&](const auto& slots) {
                              if (rank_ == 0) *all = slots;
                            });
  }

  Status Barrier() override {
    return group_->Exchange(rank_, {}, false, [](const auto&) {});
  }

  Status Send(int to, std::span<const uint8_t> bytes, int /*patience*/) override {
    if (to < 0 || to >= size_ || to == rank_)
      return InvalidArgumentError(fmt::format("Send from rank {} to rank {}", rank_, to));
    group_->Post(rank_, to, std::vector<uint8_t>(bytes.begin(), bytes.end()));
    return Status::Ok();
  }

  Status Recv(int from, std::vector<uint8_t>* bytes, int patience) override {
    if (from < 0 || from >= size_ || from == rank_)
      return InvalidArgumentError(fmt::format("Recv on rank {} from rank {}", rank_, from));
    return group_->Take(from, rank_, group_->timeout() * std::max(patience, 1), bytes);
  }

  StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override {
    int32_t mine[2] = {color, key};
    std::vector<std::pair<int, int>> members;  // (key, rank) of this color
    RETURN_IF_ERROR(
        group_->Exchange(rank_,
                         std::vector<uint8_t>(reinterpret_cast<uint8_t*>(mine),
                                              reinterpret_cast<uint8_t*>(mine) + sizeof(mine)),
                         false, [&](const auto& slots) {
                           for (int r = 0; r < size_; ++r) {
                             int32_t theirs[2];
                             std::memcpy(theirs, slots[r].data(), sizeof(theirs));
                             if (theirs[0] == color) members.emplace_back(theirs[1], r);
                           }
                         }));
    std::sort(members.begin(), members.end());
    const int sub_rank = static_cast<int>(
        std::find(members.begin(), members.end(), std::make_pair(key, rank_)) - members.begin());
    const int sub_size = static_cast<int>(members.size());
    return std::unique_ptr<Communicator>(std::make_unique<LocalCommunicator>(
        group_->SubGroup(splits_++, color, sub_size), sub_rank, sub_size));
  }
  LocalGroup& group() { return *group_; }

 private:
  std::shared_ptr<LocalGroup> group_;
  const int rank_, size_;
  int64_t splits_ = 0;  // Split calls so far (the same on every rank)
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> CreateLocalGroup(int size,
                                                            std::chrono::milliseconds timeout) {
  CHECK(size >= 1) << "group of " << size;
  auto group = std::make_shared<LocalGroup>(size, timeout);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r)
    comms.push_back(std::make_unique<LocalCommunicator>(group, r, size));
  return comms;
}

void AbortLocalGroup(Communicator& member, const Status& why) {
  auto* local = dynamic_cast<LocalCommunicator*>(&member);
  CHECK(local != nullptr) << "AbortLocalGroup: not a communicator of CreateLocalGroup";
  CHECK(!why.ok()) << "AbortLocalGroup needs a reason";
  local->group().Abort(why);
}

}  // namespace pagellm
