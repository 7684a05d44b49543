#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "base/half.h"
#include "base/huge_page_buffer.h"
#include "base/stealing_ranges.h"
#include "base/thread_pool.h"
#include "pagellm/status.h"

namespace pagellm {
namespace {

StatusOr<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgumentError("not positive");
  return v;
}

Status UseIt(int v, int* out) {
  ASSIGN_OR_RETURN(*out, ParsePositive(v));
  return Status::Ok();
}

TEST(StatusTest, PropagatesErrors) {
  int out = 0;
  EXPECT_TRUE(UseIt(3, &out).ok());
  EXPECT_EQ(out, 3);
  Status s = UseIt(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: not positive");
  EXPECT_EQ(s.WithContext("file.gguf").message(), "file.gguf: not positive");
}

TEST(StatusDeathTest, CheckAborts) {
  EXPECT_DEATH(CHECK(1 == 2) << "boom", "boom");
}

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(n);
      for (int rep = 0; rep < 20; ++rep) {
        pool.ParallelFor(n, 4, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
      }
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 20) << threads << " " << n;
    }
  }
}

// A huge-page buffer starts on a 2 MiB boundary, is writable over its whole size, moves
// without copying, and ReleasePages keeps anonymous contents.
TEST(HugePageBufferTest, ParsesAnonHugePagesOfSmapsRollup) {
  const char* rollup =
      "55d0c0000000-7ffd00000000 ---p 00000000 00:00 0  [rollup]\n"
      "Rss:             1262148 kB\n"
      "ShmemPmdMapped:        0 kB\n"
      "AnonHugePages:    993280 kB\n"
      "FilePmdMapped:     4096 kB\n";
  EXPECT_EQ(ParseAnonHugePageBytes(rollup), int64_t{993280} * 1024);
  EXPECT_EQ(ParseAnonHugePageBytes("Rss: 10 kB\nAnonHugePages: 0 kB\n"), 0);
  EXPECT_EQ(ParseAnonHugePageBytes("Rss: 10 kB\n"), -1);
  EXPECT_EQ(ParseAnonHugePageBytes("Rss: 10 kB\nXAnonHugePages: 4 kB\n"), -1);
  EXPECT_EQ(ParseAnonHugePageBytes("AnonHugePages: kB\n"), -1);
  EXPECT_GE(ProcessHugePageBytes(), -1);
}

TEST(HugePageBufferTest, AlignedWritableMovable) {
  const size_t bytes = (size_t{5} << 20) + 123;
  HugePageBuffer a(bytes);
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % (size_t{2} << 20), 0u);
  EXPECT_EQ(a.size(), bytes);
  for (size_t i = 0; i < bytes; i += 4096) a.data()[i] = static_cast<uint8_t>(i / 4096);
  a.data()[bytes - 1] = 77;
  uint8_t* const p = a.data();
  HugePageBuffer b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.data(), p);
  ReleasePages(b.data(), b.size());
  for (size_t i = 0; i < bytes; i += 4096) ASSERT_EQ(b.data()[i], static_cast<uint8_t>(i / 4096));
  EXPECT_EQ(b.data()[bytes - 1], 77);
  EXPECT_EQ(HugePageBuffer(0).data(), nullptr);
}

TEST(HalfTest, RoundTrips) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.1f}) {
    EXPECT_EQ(F16ToF32(F32ToF16(f)), static_cast<float>(static_cast<_Float16>(f))) << f;
  }
  EXPECT_EQ(F32ToBf16(0.1f), 0x3dcd);  // 0x3dcccccd rounds up
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToF32(0xc020), -2.5f);
  // Every fp16 bit pattern converts to float and back to itself (NaNs excepted).
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = F16ToF32(static_cast<uint16_t>(h));
    if (f != f) continue;
    EXPECT_EQ(F32ToF16(f), h);
  }
}

}  // namespace
}  // namespace pagellm

namespace pagellm {
namespace {

// Jobs of very different sizes back to back: a worker waking late for one job must never run
// a task of the next or be counted twice (this used to hang once in a while).
TEST(ThreadPoolTest, AlternatingJobSizesNeverHangOrRepeat) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 20000; ++rep) {
    const int64_t n = (rep % 2) ? 1 + rep % 7 : 2 + rep % 61;
    std::vector<int> hits(n, 0);
    pool.Run(n, [&](int64_t t, int) { ++hits[t]; });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "rep " << rep << " task " << i;
  }
}

// With read-ahead ranges (the caller's and the workers', in a buffer that outlives the jobs as
// a model's weights do; some jobs without a worker range or with no bytes): every task still
// runs exactly once and jobs never hang while idle threads read ahead and stop when a new job
// comes. Prefetches have no effect to check; the TSan stage runs this test too.
TEST(ThreadPoolTest, ReadAheadKeepsJobsExact) {
  ThreadPool pool(3);
  std::vector<char> weights(1 << 20, 1);
  for (int rep = 0; rep < 5000; ++rep) {
    const int64_t n = 2 + rep % 13;
    std::vector<int> hits(n, 0);
    ReadAhead ra;
    ra.caller = weights.data() + (rep % 5) * 4096;
    ra.worker = rep % 3 == 0 ? nullptr : weights.data() + (1 << 19);
    ra.bytes = (rep % 4) * 65536;
    pool.Run(
        n, [&](int64_t t, int) { ++hits[t]; }, ra);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "rep " << rep << " task " << i;
  }
}

// Shares are contiguous and cover [0, units); an owner alone gets its share in order, and a
// thief gets another share's units from the back.
TEST(StealingRangesTest, OwnersInOrderThievesFromTheBack) {
  StealingRanges r(10, 3);
  EXPECT_EQ(r.ShareBegin(0), 0);
  EXPECT_EQ(r.ShareEnd(0), 3);
  EXPECT_EQ(r.ShareBegin(1), 3);
  EXPECT_EQ(r.ShareEnd(1), 6);
  EXPECT_EQ(r.ShareBegin(2), 6);
  EXPECT_EQ(r.ShareEnd(2), 10);
  int64_t u = -1;
  ASSERT_TRUE(r.ClaimFront(1, &u));
  EXPECT_EQ(u, 3);
  ASSERT_TRUE(r.StealBack(1, &u));
  EXPECT_EQ(u, 5);
  ASSERT_TRUE(r.ClaimFront(1, &u));
  EXPECT_EQ(u, 4);
  EXPECT_FALSE(r.ClaimFront(1, &u));
  EXPECT_FALSE(r.StealBack(1, &u));
  for (int64_t want : {9, 8, 7, 6}) {
    ASSERT_TRUE(r.StealBack(2, &u));
    EXPECT_EQ(u, want);
  }
  EXPECT_FALSE(r.ClaimFront(2, &u));
  StealingRanges empty(0, 2);
  EXPECT_FALSE(empty.ClaimFront(0, &u));
  EXPECT_FALSE(empty.StealBack(1, &u));
}

// Owners and thieves racing through the pool: every unit is handed out exactly once, whatever
// the unit count (fewer units than parts included). The TSan stage runs this test too.
TEST(StealingRangesTest, EveryUnitOnceUnderRacingThreads) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 3000; ++rep) {
    const int64_t units = rep % 97;
    const int parts = 1 + rep % 4;
    StealingRanges r(units, parts);
    std::vector<std::atomic<int>> hits(static_cast<size_t>(units));
    pool.Run(parts, [&](int64_t part, int) {
      int64_t u;
      while (r.ClaimFront(static_cast<int>(part), &u)) hits[u].fetch_add(1);
      for (int q = 0; q < parts; ++q) {
        while (r.StealBack(q, &u)) hits[u].fetch_add(1);
      }
    });
    for (int64_t i = 0; i < units; ++i)
      ASSERT_EQ(hits[i].load(), 1) << "rep " << rep << " unit " << i;
  }
}

}  // namespace
}  // namespace pagellm
