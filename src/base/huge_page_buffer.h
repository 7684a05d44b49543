// Anonymous memory backed by transparent huge pages where the kernel allows it.
//
// Decode streams every weight once per token. With 4 KiB pages a stream takes a TLB miss every
// 4 KiB and the hardware prefetchers stop at each page boundary; on 2 MiB pages neither
// happens. Two threads summing 1 GiB on this project's benchmark machine (Zen 5, THP in
// "madvise" mode) read 42.5-44.8 GB/s from huge pages against 35.9-37.6 GB/s from 4 KiB pages
// in alternating rounds (docs/BENCHMARKS.md). The buffer is a 2 MiB-aligned private anonymous
// mapping advised MADV_HUGEPAGE; where THP is off it is ordinary memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pagellm {

// False when PAGELLM_HUGE_PAGES=0 (A/B benchmarks): buffers are then left on 4 KiB pages.
bool HugePagesEnabled();

class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  // Maps `bytes` (rounded up to whole 2 MiB pages); data() is null if the mapping failed.
  explicit HugePageBuffer(size_t bytes);
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& o) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& o) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }  // as requested

 private:
  void Release();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

// Asks the kernel to reclaim the whole pages inside [p, p + bytes) (MADV_PAGEOUT) once their
// contents live elsewhere, e.g. weights copied out of a file mapping. Contents are kept: a
// later read of a file-backed page faults it back in from the file. A hint; errors are ignored.
void ReleasePages(const void* p, size_t bytes);

// Bytes of this process's anonymous memory on transparent huge pages (the AnonHugePages line of
// /proc/self/smaps_rollup), or -1 where the kernel does not report it. Benchmarks report it so
// that a slow decode run can be told apart from one whose weight copies fell back to 4 KiB pages.
int64_t ProcessHugePageBytes();
// The AnonHugePages value of an smaps / smaps_rollup text in bytes, or -1 without that line.
int64_t ParseAnonHugePageBytes(std::string_view smaps);

}  // namespace pagellm
