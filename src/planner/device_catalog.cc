#include "planner/device_catalog.h"

#include <fmt/format.h>

#include <array>
#include <cctype>

namespace pagellm {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// CUDA-reported totals (MiB) next to nvidia-smi's memory.total (MiB). The difference, about
// 0.5-0.9 GiB, is memory the driver reserves; it grows with the card's size.
constexpr std::array<DeviceSpec, 9> kDevices = {{
    {"A100-40GB", 40536 * kMiB, 40960, false},  // 39.59 GiB
    {"A100-80GB", 81050 * kMiB, 81920, false},  // 79.15 GiB
    {"H100-80GB", 81008 * kMiB, 81559, false},  // 79.11 GiB
    {"H200", 143165 * kMiB, 143771, false},     // 139.81 GiB (141 GB HBM3e)
    {"L4", 22491 * kMiB, 23034, false},         // 21.96 GiB
    {"L40S", 45488 * kMiB, 46068, false},       // 44.42 GiB
    {"A10G", 22515 * kMiB, 23028, false},       // 21.99 GiB
    {"RTX4090", 24217 * kMiB, 24564, false},    // 23.65 GiB
    {"CPU", 0, 0, true},                        // AvailableHostMemoryBytes() at run time
}};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::span<const DeviceSpec> KnownDevices() {
  return kDevices;
}

StatusOr<DeviceSpec> FindDevice(std::string_view name) {
  std::string known;
  for (const DeviceSpec& d : kDevices) {
    if (EqualsIgnoreCase(d.name, name)) return d;
    known += known.empty() ? "" : ", ";
    known += d.name;
  }
  return InvalidArgumentError(
      fmt::format("--gpu {}: unknown device; known: {} (or give --device-memory)", name, known));
}

}  // namespace pagellm
