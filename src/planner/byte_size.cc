#include "planner/byte_size.h"

#include <fmt/format.h>

#include <array>
#include <cstdlib>
#include <string_view>

namespace pagellm {

std::string FormatBytes(int64_t bytes) {
  static constexpr std::array<std::string_view, 5> kNames = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t i = 0;
  while (i + 1 < kNames.size() && std::abs(v) >= 1024.0) {
    v /= 1024.0;
    ++i;
  }
  if (i == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.2f} {}", v, kNames[i]);
}

}  // namespace pagellm
