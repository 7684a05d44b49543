// Named devices for `pagellm plan --gpu NAME`: the memory one device offers to an engine.
//
// vLLM multiplies --gpu-memory-utilization by the total that CUDA reports for the device
// (torch.cuda.mem_get_info()[1], the same number as torch's `total_memory`). That total is
// below the marketing size: an "80GB" card has 80 GiB of HBM (81920 MiB in nvidia-smi) of which
// the driver keeps some, so CUDA reports about 79.1-79.3 GiB. The catalogue stores that CUDA
// total, rounded to whole MiB. Values are typical, not exact for every board, driver and ECC
// setting; pass --device-memory with your own card's number to plan exactly.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "pagellm/status.h"

namespace pagellm {

struct DeviceSpec {
  std::string_view name;     // as accepted by --gpu (case-insensitive)
  int64_t memory_bytes = 0;  // per device, as CUDA reports it; 0 for "CPU"
  int64_t nominal_mib = 0;   // nvidia-smi memory.total, for reference; 0 for "CPU"
  bool is_host = false;      // "CPU": the memory available to this process
};

// A100-40GB, A100-80GB, H100-80GB, H200, L4, L40S, A10G, RTX4090, CPU.
std::span<const DeviceSpec> KnownDevices();

// Case-insensitive lookup; InvalidArgument listing the known names otherwise.
StatusOr<DeviceSpec> FindDevice(std::string_view name);

}  // namespace pagellm
