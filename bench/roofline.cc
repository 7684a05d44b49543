// Roofline of this machine, measured: sustained memory read bandwidth (all threads, and one)
// and peak arithmetic of the instruction sets the kernels use (FP32 FMA, AVX512-BF16 dot
// products, AVX-512 VNNI int8 dot products). Decode speed is judged against the bandwidth
// (weight bytes x tokens/s), prefill against the arithmetic (FLOPs x tokens/s).
//
//   build/bench/roofline [--threads N] [--json]
//
// Read bandwidth is measured on 2 MiB huge pages (the headline, as the engine keeps its weights
// there) and on 4 KiB pages (what a file mapping such as llama.cpp's default mmap gets).
// GCC 12 warns falsely (-Wuninitialized) inside the AVX-512 reduction intrinsics.
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Pins the calling thread to the t-th CPU it may run on (one thread per core: the peaks are
// per-core figures times threads, and two threads sharing a core would halve each other).
void PinToCpu(int t) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  int seen = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &allowed)) continue;
    if (seen++ == t) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(c, &one);
      pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
      return;
    }
  }
}

// Runs fn(thread) on n threads at once; returns the wall time of the slowest.
template <typename Fn>
double RunThreads(int n, Fn fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  Clock::time_point start;
  for (int t = 0; t < n; ++t) {
    ts.emplace_back([&, t] {
      PinToCpu(t);
      ready.fetch_add(1);
      while (!go.load()) {
      }
      fn(t);
    });
  }
  while (ready.load() != n) {
  }
  start = Clock::now();
  go.store(true);
  for (auto& th : ts) th.join();
  return Seconds(start, Clock::now());
}

__attribute__((target("avx512f"))) float ReadSum(const float* p, size_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// Best of `reps` passes over a buffer much larger than the caches, split across threads. With
// huge_pages the buffer is advised onto 2 MiB transparent huge pages, as the engine's weights
// are (base/huge_page_buffer.h): no TLB miss and no prefetcher stop every 4 KiB.
double ReadBandwidth(int threads, size_t bytes, int reps, bool huge_pages) {
  const size_t n = bytes / sizeof(float);
  constexpr size_t kHugePage = size_t{2} << 20;
  float* buf = static_cast<float*>(std::aligned_alloc(kHugePage, n * sizeof(float)));
  if (huge_pages) madvise(buf, n * sizeof(float), MADV_HUGEPAGE);
  for (size_t i = 0; i < n; ++i) buf[i] = static_cast<float>(i & 1023);
  volatile float sink = 0;
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const double t = RunThreads(threads, [&](int th) {
      const size_t chunk = n / threads / 64 * 64;
      sink = sink + ReadSum(buf + th * chunk, chunk);
    });
    best = std::max(best, static_cast<double>(n / threads / 64 * 64 * threads * sizeof(float)) / t);
  }
  std::free(buf);
  return best / 1e9;
}

constexpr long kIters = 20'000'000;

// The peak loops are written in inline assembly so that the measured instruction stream is
// exactly 12 independent register accumulators per iteration: with arrays of intrinsics the
// compiler may keep the accumulators in memory (GCC 12 did at -O2: every FMA then waited on a
// store-to-load forward, which measured 170 GFLOP/s instead of the real peak). 12 chains cover
// latency x throughput on Zen 4/5 (4-cycle FMA x 2 pipes = 8 in flight). zmm16/17 hold the
// (constant) multiplicands; the accumulators are zmm0..11.
// clang-format off
#define PAGELLM_ROOFLINE_LOOP(INSN)                                                           \
  __asm__ volatile(                                                                          \
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"                                                    \
      "vmovdqa64 %%zmm0, %%zmm1\n\tvmovdqa64 %%zmm0, %%zmm2\n\tvmovdqa64 %%zmm0, %%zmm3\n\t"  \
      "vmovdqa64 %%zmm0, %%zmm4\n\tvmovdqa64 %%zmm0, %%zmm5\n\tvmovdqa64 %%zmm0, %%zmm6\n\t"  \
      "vmovdqa64 %%zmm0, %%zmm7\n\tvmovdqa64 %%zmm0, %%zmm8\n\tvmovdqa64 %%zmm0, %%zmm9\n\t"  \
      "vmovdqa64 %%zmm0, %%zmm10\n\tvmovdqa64 %%zmm0, %%zmm11\n\t"                           \
      "vpbroadcastd %[c], %%zmm16\n\tvmovdqa64 %%zmm16, %%zmm17\n\t"                         \
      "1:\n\t" INSN " %%zmm16, %%zmm17, %%zmm0\n\t" INSN " %%zmm16, %%zmm17, %%zmm1\n\t" INSN  \
      " %%zmm16, %%zmm17, %%zmm2\n\t" INSN " %%zmm16, %%zmm17, %%zmm3\n\t" INSN                \
      " %%zmm16, %%zmm17, %%zmm4\n\t" INSN " %%zmm16, %%zmm17, %%zmm5\n\t" INSN                \
      " %%zmm16, %%zmm17, %%zmm6\n\t" INSN " %%zmm16, %%zmm17, %%zmm7\n\t" INSN                \
      " %%zmm16, %%zmm17, %%zmm8\n\t" INSN " %%zmm16, %%zmm17, %%zmm9\n\t" INSN                \
      " %%zmm16, %%zmm17, %%zmm10\n\t" INSN " %%zmm16, %%zmm17, %%zmm11\n\t"                  \
      "dec %[n]\n\tjnz 1b\n\t"                                                               \
      : [n] "+r"(n)                                                                          \
      : [c] "m"(c)                                                                           \
      : "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9",      \
        "zmm10", "zmm11", "zmm16", "zmm17", "cc")
// clang-format on
constexpr int kChains = 12;

// vfmadd231ps: 16 lanes x 2 flops. c = 1.0f: acc += 1 x 1, normal numbers throughout.
__attribute__((target("avx512f"))) float FmaLoop() {
  long n = kIters;
  const int32_t c = 0x3f800000;
  PAGELLM_ROOFLINE_LOOP("vfmadd231ps");
  return 0.0f;
}

// vdpbf16ps: 32 bf16 products summed pairwise into 16 fp32 lanes = 64 flops per instruction.
__attribute__((target("avx512f,avx512bf16"))) float Bf16Loop() {
  long n = kIters;
  const int32_t c = 0x3f803f80;  // bf16 pairs (1.0, 1.0)
  PAGELLM_ROOFLINE_LOOP("vdpbf16ps");
  return 0.0f;
}

// vpdpbusd: 64 u8 x s8 products summed in groups of 4 into 16 int32 lanes = 128 ops.
__attribute__((target("avx512f,avx512vnni"))) float VnniLoop() {
  long n = kIters;
  const int32_t c = 0x01010101;
  PAGELLM_ROOFLINE_LOOP("vpdpbusd");
  return 0.0f;
}

template <typename Fn>
double PeakOps(int threads, double ops_per_iter, Fn fn) {
  volatile double sink = 0;
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    const double t = RunThreads(threads, [&](int) { sink = sink + fn(); });
    best = std::max(best, ops_per_iter * kIters * threads / t);
  }
  return best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--json") == 0) json = true;
  }
  if (!__builtin_cpu_supports("avx512f")) {
    std::fprintf(stderr, "roofline: needs AVX-512\n");
    return 1;
  }
  const size_t bytes = size_t{1} << 30;  // 1 GiB: far beyond the 32 MiB L3
  const double bw_all = ReadBandwidth(threads, bytes, 5, /*huge_pages=*/true);
  const double bw_one = ReadBandwidth(1, bytes, 5, /*huge_pages=*/true);
  const double bw_small = ReadBandwidth(threads, bytes, 5, /*huge_pages=*/false);
  const double fma = PeakOps(threads, kChains * 16 * 2, FmaLoop);
  const double bf16 =
      __builtin_cpu_supports("avx512bf16") ? PeakOps(threads, kChains * 64, Bf16Loop) : 0;
  const double vnni =
      __builtin_cpu_supports("avx512vnni") ? PeakOps(threads, kChains * 128, VnniLoop) : 0;
  if (json) {
    std::printf(
        "{\"threads\": %d, \"read_bandwidth_gbs\": %.1f, \"read_bandwidth_1thread_gbs\": %.1f, "
        "\"read_bandwidth_4k_pages_gbs\": %.1f, \"fp32_fma_gflops\": %.1f, "
        "\"bf16_dot_gflops\": %.1f, \"int8_vnni_gops\": %.1f}\n",
        threads, bw_all, bw_one, bw_small, fma, bf16, vnni);
  } else {
    std::printf("threads:                  %d\n", threads);
    std::printf(
        "read bandwidth:           %.1f GB/s (1 thread: %.1f GB/s; 4 KiB pages: %.1f GB/s)\n",
        bw_all, bw_one, bw_small);
    std::printf("FP32 FMA (AVX-512):       %.1f GFLOP/s\n", fma);
    std::printf("BF16 dot (AVX512-BF16):   %.1f GFLOP/s\n", bf16);
    std::printf("INT8 dot (AVX-512 VNNI):  %.1f GOP/s\n", vnni);
  }
  return 0;
}
