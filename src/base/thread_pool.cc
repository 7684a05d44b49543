#include "base/thread_pool.h"

#include <sched.h>

#include <algorithm>

#include "pagellm/check.h"

namespace pagellm {

namespace {
// Spin this many iterations waiting for work before blocking; decode steps come back-to-back,
// so sleeping between them would cost more than the spin.
constexpr int kSpinIterations = 1 << 14;

inline void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// Read-ahead: cache lines prefetched between two checks of whether the wait is over.
constexpr int64_t kReadAheadLinesPerCheck = 8;
constexpr int64_t kLine = 64;

// Prefetches the lines of [p, end) while waiting() holds, checking it every few lines.
template <typename Waiting>
void PrefetchWhile(const char* p, const char* end, Waiting waiting) {
  while (p < end && waiting()) {
    for (int64_t i = 0; i < kReadAheadLinesPerCheck && p < end; ++i, p += kLine)
      __builtin_prefetch(p, 0, 3);
  }
}

constexpr uint64_t Pack(uint64_t job, uint64_t index) {
  return (job << 32) | index;
}
// Index of a finished job: above any task count (< 2^31), and a few stale increments still
// stay below 2^32, so they never spill into the job bits.
constexpr uint64_t kClosedIndex = 0x7fffffffu;
constexpr uint64_t JobOf(uint64_t claim) {
  return claim >> 32;
}
constexpr uint64_t IndexOf(uint64_t claim) {
  return claim & 0xffffffffu;
}
}  // namespace

int ThreadPool::AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

ThreadPool::ThreadPool(int num_threads) {
  num_threads_ = num_threads > 0 ? num_threads : AvailableCpus();
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

// Claims and runs tasks of job `job` until none are left. A claim is (job, index) packed in one
// atomic, so a worker that wakes late can never take a task of a newer job by mistake, and the
// job's fn_/ctx_ cannot change while a claimed task runs (the job is not done until it ends).
void ThreadPool::DoTasks(uint64_t job, int thread_index) {
  uint64_t claim = claim_.load(std::memory_order_acquire);
  while (JobOf(claim) == job &&
         IndexOf(claim) < static_cast<uint64_t>(num_tasks_.load(std::memory_order_relaxed))) {
    if (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel)) continue;
    fn_.load(std::memory_order_relaxed)(ctx_.load(std::memory_order_relaxed),
                                        static_cast<int64_t>(IndexOf(claim)), thread_index);
    done_.fetch_add(1, std::memory_order_acq_rel);
    claim = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::RunImpl(int64_t num_tasks, TaskFn fn, void* ctx, const ReadAhead& read_ahead) {
  CHECK_LT(num_tasks, int64_t{1} << 31);
  const uint64_t job = ++job_id_;
  fn_.store(fn, std::memory_order_relaxed);
  ctx_.store(ctx, std::memory_order_relaxed);
  num_tasks_.store(num_tasks, std::memory_order_relaxed);
  read_ahead_.store(read_ahead.worker, std::memory_order_relaxed);
  read_ahead_bytes_.store(read_ahead.bytes, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  claim_.store(Pack(job, 0), std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  DoTasks(job, 0);
  // The caller never waits for a worker that has not started: it only waits for tasks that
  // are already claimed and running. Meanwhile it reads ahead, if asked to.
  if (read_ahead.caller != nullptr && read_ahead.bytes > 0) {
    const char* p = static_cast<const char*>(read_ahead.caller);
    PrefetchWhile(p, p + read_ahead.bytes,
                  [&] { return done_.load(std::memory_order_acquire) != num_tasks; });
  }
  for (int spins = 0; done_.load(std::memory_order_acquire) != num_tasks; ++spins) {
    if (spins < kSpinIterations) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
  // Close the job before the next RunImpl overwrites fn_/ctx_/num_tasks_: a worker that loaded
  // this job's claim earlier must find no task left, whatever num_tasks_ becomes. Without this
  // a late worker could pair an old claim with the next job's larger num_tasks_, run a task
  // twice and overshoot done_ (a hang).
  claim_.store(Pack(job, kClosedIndex), std::memory_order_release);
}

void ThreadPool::WorkerLoop(int thread_index) {
  // Generation 0 is "no job yet"; reading generation_ here instead would miss a job posted
  // before this thread started.
  uint64_t seen = 0;
  while (true) {
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinIterations) {
      CpuRelax();
      ++spins;
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    DoTasks(JobOf(claim_.load(std::memory_order_acquire)), thread_index);
    WorkerReadAhead(thread_index, seen);
  }
}

void ThreadPool::WorkerReadAhead(int thread_index, uint64_t seen_generation) {
  const char* base = static_cast<const char*>(read_ahead_.load(std::memory_order_relaxed));
  const int64_t bytes = read_ahead_bytes_.load(std::memory_order_relaxed);
  if (base == nullptr || bytes <= 0) return;
  // Worker i of n - 1 takes the i-th share, whole lines.
  const int64_t workers = num_threads_ - 1;
  const int64_t share = (bytes / workers + kLine - 1) / kLine * kLine;
  PrefetchWhile(base + std::min(bytes, (thread_index - 1) * share),
                base + std::min(bytes, thread_index * share),
                [&] { return generation_.load(std::memory_order_acquire) == seen_generation; });
}

}  // namespace pagellm
