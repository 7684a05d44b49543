// Memory sizes in reports: "79.15 GiB". (Sizes on the command line are parsed by the CLI's
// ParseByteSize, the same parser the engine flags use.)
#pragma once

#include <cstdint>
#include <string>

namespace pagellm {

// Two decimals in the largest binary unit (B, KiB, MiB, GiB, TiB) that keeps the value >= 1.
std::string FormatBytes(int64_t bytes);

}  // namespace pagellm
