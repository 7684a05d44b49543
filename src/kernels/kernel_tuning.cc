#include "kernels/kernel_tuning.h"

#include <charconv>
#include <cstdlib>

#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace pagellm {

KernelTuning KernelTuningFor(CpuMicroarch microarch) {
  // One row for every microarch today: the defaults were measured on Zen 5 (family 26; the
  // kernels' comments quote the A/B runs), and the Zen 4 A/B of the prefetch distances
  // (docs/BENCHMARKS.md, "Per-machine tables") was within the noise of a busy bus. A row that
  // measures better on some CPU goes here as a case of `microarch`.
  (void)microarch;
  return KernelTuning{};
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
    if (ec != std::errc() || end != text.data() + text.size() || value < 0 || value > (1 << 20) ||
        value % 64 != 0)
      return InvalidArgumentError(fmt::format(
          "kernel tuning '{}': the value must be bytes, a multiple of 64 in [0, 1048576]", item));
    if (key == "quant_prefetch") {
      t.quant_prefetch_bytes = value;
    } else if (key == "f16_prefetch") {
      t.f16_prefetch_bytes = value;
    } else if (key == "row_prefetch") {
      t.row_prefetch_bytes = value;
    } else {
      return InvalidArgumentError(fmt::format(
          "kernel tuning '{}': unknown key (quant_prefetch, f16_prefetch, row_prefetch)", item));
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
  return fmt::format("quant_prefetch={} f16_prefetch={} row_prefetch={}", t.quant_prefetch_bytes,
                     t.f16_prefetch_bytes, t.row_prefetch_bytes);
}

}  // namespace pagellm
