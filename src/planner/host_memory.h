// The memory available to this process on the host, including cgroup (container) limits.
// This is the "device memory" that --gpu-memory-utilization scales on the CPU backend.
//
// Available = min(MemTotal of /proc/meminfo, every memory limit of the process's cgroup and its
// ancestors): cgroup v2 `memory.max`, cgroup v1 `memory.limit_in_bytes`. "max" and v1's
// "unlimited" (a number near 2^63) impose nothing. MemTotal rather than MemAvailable: the
// fraction is of what the process may use, not of what happens to be free at start-up (vLLM
// also scales the device total, not its free memory).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace pagellm {

// Returns 0 only when /proc/meminfo cannot be read or parsed.
uint64_t AvailableHostMemoryBytes();

// The memory free for this process now: min(MemAvailable of /proc/meminfo, limit - usage of
// the process's cgroup and each ancestor: v2 memory.max - memory.current, v1
// memory.limit_in_bytes - memory.usage_in_bytes). MemAvailable counts reclaimable page cache as
// free, as the kernel does. 0 when /proc/meminfo cannot be read or has no MemAvailable.
uint64_t FreeHostMemoryBytes();

// ---- The same computation over an injected file reader (for tests). ----

// Reads a whole (small) file; nullopt when it does not exist or cannot be read.
using TextFileReader = std::function<std::optional<std::string>(const std::string& path)>;

uint64_t AvailableHostMemoryBytes(const TextFileReader& read_file);

uint64_t FreeHostMemoryBytes(const TextFileReader& read_file);

// "MemTotal:  24684092 kB" -> bytes.
std::optional<uint64_t> ParseMemTotalBytes(std::string_view meminfo);

// The "<key> <n> kB" line of /proc/meminfo (key with its colon, e.g. "MemAvailable:") -> bytes.
std::optional<uint64_t> ParseMeminfoBytes(std::string_view meminfo, std::string_view key);

// A cgroup limit file's content: a decimal byte count, or "max" (no limit -> nullopt).
std::optional<uint64_t> ParseCgroupLimitBytes(std::string_view text);

// The process's cgroup paths from /proc/self/cgroup: the v2 unified line "0::/path" and the v1
// line whose controller list contains "memory" ("4:memory:/path"). Empty when absent.
struct ProcessCgroups {
  std::optional<std::string> v2_path;
  std::optional<std::string> v1_memory_path;
};
ProcessCgroups ParseProcSelfCgroup(std::string_view text);

}  // namespace pagellm
