#include "base/thread_pool.h"

#include <sched.h>

#include "pagellm/check.h"

namespace pagellm {

namespace {
// Spin this many iterations waiting for work/completion before blocking; decode steps come
// back-to-back, so sleeping between them would cost more than the spin.
constexpr int kSpinIterations = 1 << 16;

inline void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
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

void ThreadPool::DoTasks(int thread_index) {
  for (int64_t t = thread_index; t < num_tasks_; t += num_threads_) fn_(ctx_, t, thread_index);
}

void ThreadPool::RunImpl(int64_t num_tasks, TaskFn fn, void* ctx) {
  fn_ = fn;
  ctx_ = ctx;
  num_tasks_ = num_tasks;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  DoTasks(0);
  while (pending_.load(std::memory_order_acquire) != 0) CpuRelax();
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
    DoTasks(thread_index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace pagellm
