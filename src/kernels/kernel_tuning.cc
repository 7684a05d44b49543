#include "kernels/kernel_tuning.h"

#include <charconv>
#include <cstdlib>

#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace pagellm {

KernelTuning KernelTuningFor(CpuMicroarch microarch) {
  // The defaults were first measured on Zen 5 (family 26; the kernels' comments quote the A/B
  // runs); the Zen 5 row below revises two of them.
  KernelTuning t;
  switch (microarch) {
    case CpuMicroarch::kZen4:
      // Zen 4 (family 25 model 17, 2 vCPUs; docs/BENCHMARKS.md "Microarchitecture rows"): the
      // F16/BF16 lane stream runs faster on the hardware prefetchers alone. Software prefetches
      // 64 KiB ahead held the core at ~30 GB/s whatever the bus did (the loads and the misses
      // serialized: cold GEMV = 1 / (1 / hot + 1 / bus)); without them Llama-3.2-1B F16 tg64
      // measured 12.4-17.4 vs 12.0-13.1 t/s, alternating, and the cold 8192x2048 GEMV 37-44 vs
      // 28-29 GB/s on 2 threads.
      t.f16_prefetch_bytes = 0;
      // The quantized streams' prefetches into L2 only: Llama-3.2-1B tg64, same binary,
      // alternating with prefetcht0 (docs/BENCHMARKS.md, 2026-12-03 10:19, once the Q4_0/Q8_0
      // prefetches were really issued, 52c23eb): Q4_0 median 32.7 -> 38.7 t/s in 4 of 4 rounds,
      // Q8_0 17.2 -> 20.4 in 3 of 3 (Q4_K_M +4-15% in the earlier run, where its prefetch existed).
      t.quant_prefetch_l2 = true;
      break;
    case CpuMicroarch::kZen5:
      // Zen 5 (family 26 model 2, 2 vCPUs), Llama-3.2-1B tg64 on 2 threads, same binary,
      // alternating in the same minutes (docs/BENCHMARKS.md, "Zen 5 prefetch rows",
      // 2026-12-03), once the quantized prefetches were really issued (52c23eb): Q8_0 without
      // software prefetch 51.5-52.2 t/s vs 37.7-40.8 with it 64 KiB ahead (3 of 3 rounds; into
      // L2 only 38.9); F16 without 24.2-26.4 vs 21.6-22.8 (3 of 3). Q4_0 is within noise
      // either way (L2-only prefetch 66-75, none 66-73, L1 63-69 t/s); Q4_K_M and Q6_K need
      // theirs (none: -8% and -17%), so the shared quantized distance stays.
      t.q8_0_prefetch_bytes = 0;
      t.f16_prefetch_bytes = 0;
      // K-quant / IQ4_XS super-blocks 16 KiB ahead instead of 64 KiB, once a prefetch cost one
      // instruction per line (4000bef): Llama-3.2-1B tg64, same binary, alternating
      // (docs/BENCHMARKS.md, "Zen 5 ... quantized decode prefetches"): Q6_K 62.6-64.5 vs
      // 51.6-53.7 t/s in 3 of 3 rounds (8 KiB 53-65, 24 KiB 50-56), IQ4_XS 73.9-76.9 vs
      // 54.7-64.8, Q4_K_M 64.4-72.5 vs 59.8-59.9, Q5_K_M 37.0-63.0 vs 35.8-58.8. Q4_0 groups
      // measure better at 64 KiB (67.9-68.0 vs 63.5-64.0 t/s), so quant_prefetch stays.
      t.kquant_prefetch_bytes = 16384;
      // Threads that wait at a decode MatMul's end read 256 KiB ahead into the next call's
      // quantized matrix (docs/BENCHMARKS.md, "Zen 5 ... idle read-ahead", 2026-12-04): tg64 on
      // 2 threads, same binary, alternating, bus 49-79 GB/s: Qwen2.5-1.5B Q4_K_M +1.3% (5 of 6
      // rounds faster, -0.2..+2.0%), Llama-3.2-1B Q4_K_M +2.2% (3 of 4); 64 KiB, 128 KiB and
      // 1 MiB were no better. Packed Q4_0 groups measured 5-6% slower with it in quiet minutes
      // and F16 1-3% slower, so only the decode-kernel formats read ahead (matmul.cc).
      t.idle_read_ahead_bytes = 262144;
      break;
    case CpuMicroarch::kOther:
    case CpuMicroarch::kIntelAvx512:
      break;
  }
  return t;
}

StatusOr<KernelTuning> ApplyKernelTuningOverrides(KernelTuning t, std::string_view overrides) {
  while (!overrides.empty()) {
    const size_t comma = overrides.find(',');
    const std::string_view item = overrides.substr(0, comma);
    overrides = comma == std::string_view::npos ? std::string_view() : overrides.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return InvalidArgumentError(fmt::format("kernel tuning '{}': expected key=value", item));
    const std::string_view key = item.substr(0, eq), text = item.substr(eq + 1);
    int64_t value = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (key == "quant_prefetch_l2") {
      if (ec != std::errc() || end != text.data() + text.size() || (value != 0 && value != 1))
        return InvalidArgumentError(
            fmt::format("kernel tuning '{}': the value must be 0 or 1", item));
      t.quant_prefetch_l2 = value == 1;
      continue;
    }
    if (key == "attention_run_floats") {
      if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > (1 << 20))
        return InvalidArgumentError(
            fmt::format("kernel tuning '{}': the value must be floats in [1, 1048576]", item));
      t.attention_run_floats = value;
      continue;
    }
    if (ec != std::errc() || end != text.data() + text.size() || value < 0 || value > (1 << 20) ||
        value % 64 != 0)
      return InvalidArgumentError(fmt::format(
          "kernel tuning '{}': the value must be bytes, a multiple of 64 in [0, 1048576]", item));
    if (key == "quant_prefetch") {
      t.quant_prefetch_bytes = value;
    } else if (key == "kquant_prefetch") {
      t.kquant_prefetch_bytes = value;
    } else if (key == "q8_0_prefetch") {
      t.q8_0_prefetch_bytes = value;
    } else if (key == "f16_prefetch") {
      t.f16_prefetch_bytes = value;
    } else if (key == "row_prefetch") {
      t.row_prefetch_bytes = value;
    } else if (key == "idle_read_ahead") {
      t.idle_read_ahead_bytes = value;
    } else {
      return InvalidArgumentError(fmt::format(
          "kernel tuning '{}': unknown key (quant_prefetch, quant_prefetch_l2, kquant_prefetch, "
          "q8_0_prefetch, f16_prefetch, row_prefetch, attention_run_floats, idle_read_ahead)",
          item));
    }
  }
  return t;
}

const KernelTuning& GetKernelTuning() {
  static const KernelTuning tuning = [] {
    KernelTuning t = KernelTuningFor(GetCpuIdentity().microarch);
    if (const char* env = std::getenv("PAGELLM_KERNEL_TUNING")) {
      StatusOr<KernelTuning> o = ApplyKernelTuningOverrides(t, env);
      if (o.ok()) {
        t = *o;
      } else {
        spdlog::warn("PAGELLM_KERNEL_TUNING ignored: {}", o.status().message());
      }
    }
    return t;
  }();
  return tuning;
}

std::string KernelTuningString(const KernelTuning& t) {
  return fmt::format(
      "quant_prefetch={} quant_prefetch_l2={} kquant_prefetch={} q8_0_prefetch={} "
      "f16_prefetch={} row_prefetch={} attention_run_floats={} idle_read_ahead={}",
      t.quant_prefetch_bytes, t.quant_prefetch_l2 ? 1 : 0, t.kquant_prefetch_bytes,
      t.q8_0_prefetch_bytes, t.f16_prefetch_bytes, t.row_prefetch_bytes, t.attention_run_floats,
      t.idle_read_ahead_bytes);
}

}  // namespace pagellm
