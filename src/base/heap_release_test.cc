#include "base/heap_release.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

namespace pagellm {
namespace {

// Resident bytes of this process (/proc/self/statm, second field, in pages).
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// Contract: memory a thread (so its own malloc arena, not the main one) touched and freed
// leaves the process's RSS after ReleaseFreeHeapMemory. (The arena-top case it exists for is
// shown end to end by bench/big_request_memory.py; see docs/BENCHMARKS.md.)
TEST(HeapRelease, ThreadArenaReturnsToTheKernel) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's allocator replaces glibc's malloc";
#endif
  constexpr size_t kBlock = 4000;
  constexpr size_t kCount = (64u << 20) / kBlock;
  constexpr size_t kPin = 64;
  int64_t before = 0, peak = 0, after = 0;
  std::thread t([&] {
    before = ResidentBytes();
    // The thread cache takes 7 freed blocks per size; these fill it for the pin's size.
    std::vector<void*> fillers(7);
    for (void*& f : fillers) f = std::malloc(kPin);
    std::vector<void*> blocks(kCount);
    for (void*& b : blocks) {
      b = std::malloc(kBlock);
      std::memset(b, 1, kBlock);
    }
    void* pin = std::malloc(kPin);
    peak = ResidentBytes();
    std::shuffle(blocks.begin(), blocks.end(), std::mt19937(1));
    for (void* b : blocks) std::free(b);
    for (void* f : fillers) std::free(f);
    std::free(pin);
    ReleaseFreeHeapMemory();
    after = ResidentBytes();
  });
  t.join();
  ASSERT_GT(peak - before, int64_t{60} << 20);  // the blocks were resident
  EXPECT_LT(after - before, int64_t{4} << 20) << "before " << before << " after " << after;
}

}  // namespace
}  // namespace pagellm
