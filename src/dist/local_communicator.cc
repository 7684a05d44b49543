#include "dist/local_communicator.h"

#include <condition_variable>
#include <cstring>
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

  LocalGroup& group() { return *group_; }

 private:
  std::shared_ptr<LocalGroup> group_;
  const int rank_, size_;
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
