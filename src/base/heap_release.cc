#include "base/heap_release.h"

#include <malloc.h>

#include <cstdlib>

namespace pagellm {
namespace {
// glibc's FASTBIN_CONSOLIDATION_THRESHOLD: a free() of a chunk this large (header included)
// consolidates the arena and trims its top. Below the 1 MiB mmap threshold `pagellm serve`
// sets, so the block comes from the arena, not from its own mapping.
constexpr size_t kTrimTriggerBytes = 64 * 1024;
}  // namespace

void ReleaseFreeHeapMemory() {
  malloc_trim(0);
  // volatile: the compiler may not drop a malloc/free pair whose block is never used.
  void* volatile block = std::malloc(kTrimTriggerBytes);
  std::free(block);
}

}  // namespace pagellm
