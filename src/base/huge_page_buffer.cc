#include "base/huge_page_buffer.h"

#include <sys/mman.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

namespace pagellm {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;

// Advises the whole 2 MiB pages inside [p, p + bytes) to be backed by huge pages (no-op when
// disabled). A hint: where THP is unavailable the call fails and the memory stays on small pages.
void AdviseHugePages(void* p, size_t bytes) {
  if (!HugePagesEnabled() || bytes < kHugePage) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHugePage - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace

bool HugePagesEnabled() {
  static const bool enabled = [] {
    const char* e = std::getenv("PAGELLM_HUGE_PAGES");
    return e == nullptr || std::strcmp(e, "0") != 0;
  }();
  return enabled;
}

void ReleasePages(const void* p, size_t bytes) {
  constexpr uintptr_t kPage = 4096;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kPage - 1) & ~(kPage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kPage - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
}

int64_t ParseAnonHugePageBytes(std::string_view smaps) {
  constexpr std::string_view kKey = "AnonHugePages:";
  size_t at = smaps.find(kKey);
  if (at == std::string_view::npos || (at > 0 && smaps[at - 1] != '\n')) return -1;
  at += kKey.size();
  while (at < smaps.size() && smaps[at] == ' ') ++at;
  int64_t kib = 0;
  const char* end = smaps.data() + smaps.size();
  const std::from_chars_result r = std::from_chars(smaps.data() + at, end, kib);
  return r.ec == std::errc() ? kib * 1024 : -1;
}

int64_t ProcessHugePageBytes() {
  std::ifstream in("/proc/self/smaps_rollup");
  if (!in) return -1;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseAnonHugePageBytes(text);
}

HugePageBuffer::HugePageBuffer(size_t bytes) {
  if (bytes == 0) return;
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Over-map by one huge page and trim, so the buffer starts on a 2 MiB boundary.
  const size_t span = rounded + kHugePage;
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;
  const uintptr_t raw = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (raw + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > raw) ::munmap(p, aligned - raw);
  const uintptr_t tail = aligned + rounded;
  if (raw + span > tail) ::munmap(reinterpret_cast<void*>(tail), raw + span - tail);
  data_ = reinterpret_cast<uint8_t*>(aligned);
  size_ = bytes;
  mapped_ = rounded;
  // Only the whole huge pages inside the bytes asked for: a partial last page on huge pages
  // would make all 2 MiB resident on first touch (a Qwen3-30B-A3B expert matrix of 0.84 MiB
  // took 2 MiB, 2.3x the model, and the 16 GB file no longer fitted in 24 GiB).
  AdviseHugePages(data_, bytes);
}

HugePageBuffer::~HugePageBuffer() {
  Release();
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& o) noexcept {
  *this = std::move(o);
}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& o) noexcept {
  if (this != &o) {
    Release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
  }
  return *this;
}

void HugePageBuffer::Release() {
  if (data_ != nullptr) ::munmap(data_, mapped_);
  data_ = nullptr;
  size_ = 0;
  mapped_ = 0;
}

}  // namespace pagellm
