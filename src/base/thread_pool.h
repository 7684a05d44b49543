// A fixed pool of worker threads for data-parallel kernels: no per-op thread spawn, no
// allocation per call. The calling thread participates as worker 0.
//
// Tasks are claimed dynamically, and kernels must make every output element's arithmetic
// independent of the split and of the thread that runs it, so results are bitwise identical
// for any thread count.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace pagellm {

// Bytes a thread that has run out of tasks may prefetch while it waits (the reads the caller
// expects to come next, e.g. the start of the next matrix of a decode step): the calling
// thread, waiting for the job's last tasks, reads ahead from `caller`; the workers, waiting for
// the next job, split [worker, worker + bytes). Either may be null. A hint only: prefetches
// never fault and change no result; each thread stops as soon as its wait ends.
struct ReadAhead {
  const void* caller = nullptr;
  const void* worker = nullptr;
  int64_t bytes = 0;
};

class ThreadPool {
 public:
  // num_threads <= 0 means all hardware threads available to the process.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(task, thread) for task in [0, num_tasks), spread over the threads; returns when
  // all are done. `thread` is in [0, num_threads) and unique among concurrently running calls
  // (for per-thread scratch). fn must not call back into the pool.
  // With `read_ahead`, threads that run out of tasks prefetch its ranges while they wait.
  template <typename Fn>
  void Run(int64_t num_tasks, Fn&& fn, const ReadAhead& read_ahead = {}) {
    if (num_tasks <= 0) return;
    if (num_threads_ == 1 || num_tasks == 1) {
      for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
      return;
    }
    RunImpl(num_tasks, &Trampoline<std::remove_reference_t<Fn>>, &fn, read_ahead);
  }

  // Splits [0, n) into contiguous ranges of at least `grain` elements, one per task, and calls
  // fn(begin, end). Range boundaries depend only on n, grain and the thread count.
  template <typename Fn>
  void ParallelFor(int64_t n, int64_t grain, Fn&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t tasks = (n + grain - 1) / grain;
    if (tasks > num_threads_) tasks = num_threads_;
    const int64_t chunk = (n + tasks - 1) / tasks;
    Run(tasks, [&](int64_t t, int) {
      const int64_t b = t * chunk;
      const int64_t e = b + chunk < n ? b + chunk : n;
      if (b < e) fn(b, e);
    });
  }

  // Number of CPUs this process may run on (sched_getaffinity), at least 1.
  static int AvailableCpus();

 private:
  using TaskFn = void (*)(void* ctx, int64_t task, int thread);
  template <typename F>
  static void Trampoline(void* ctx, int64_t task, int thread) {
    (*static_cast<F*>(ctx))(task, thread);
  }
  void RunImpl(int64_t num_tasks, TaskFn fn, void* ctx, const ReadAhead& read_ahead);
  // Prefetches the worker's share of the current read-ahead range until a new job is posted.
  void WorkerReadAhead(int thread_index, uint64_t seen_generation);
  void WorkerLoop(int thread_index);
  void DoTasks(uint64_t job, int thread_index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> claim_{0};  // (job id << 32) | next task index
  std::atomic<int64_t> done_{0};    // tasks of the current job finished
  uint64_t job_id_ = 0;             // caller-side job counter
  std::atomic<bool> stop_{false};
  // The current job; written by the caller before it publishes the job's first claim. Atomic
  // because a worker that woke late may still read num_tasks_ of a closed job while the caller
  // writes the next one's (the closed claim makes it stop either way); fn_ and ctx_ are read
  // only after a successful claim of the current job, which orders them after their writes.
  std::atomic<TaskFn> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::atomic<int64_t> num_tasks_{0};
  // The workers' read-ahead range of the current job (ReadAhead::worker, bytes); atomic for the
  // same reason as num_tasks_ (a stale pair only prefetches the wrong lines).
  std::atomic<const void*> read_ahead_{nullptr};
  std::atomic<int64_t> read_ahead_bytes_{0};
};

}  // namespace pagellm
