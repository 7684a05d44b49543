// AvailableHostMemoryBytes over simulated /proc and /sys trees (cgroup v1, v2, none).
#include "planner/host_memory.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace pagellm {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

TextFileReader Files(std::map<std::string, std::string> files) {
  return [files = std::move(files)](const std::string& path) -> std::optional<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
}

const char kMeminfo[] =
    "MemTotal:       24684092 kB\n"
    "MemFree:        19207576 kB\n"
    "MemAvailable:   23060360 kB\n";

TEST(HostMemoryTest, ParsesMemTotal) {
  EXPECT_EQ(ParseMemTotalBytes(kMeminfo), uint64_t{24684092} * 1024);
  EXPECT_FALSE(ParseMemTotalBytes("MemFree: 1 kB\n").has_value());
  EXPECT_FALSE(ParseMemTotalBytes("MemTotal: lots\n").has_value());
}

TEST(HostMemoryTest, ParsesCgroupLimits) {
  EXPECT_EQ(ParseCgroupLimitBytes("4294967296\n"), uint64_t{4294967296});
  EXPECT_FALSE(ParseCgroupLimitBytes("max\n").has_value());
  EXPECT_FALSE(ParseCgroupLimitBytes("").has_value());
}

TEST(HostMemoryTest, ParsesProcSelfCgroup) {
  const ProcessCgroups v1 =
      ParseProcSelfCgroup("9:name=systemd:/\n4:memory:/process_api/abc\n3:cpu,cpuacct:/x\n0::/\n");
  EXPECT_EQ(v1.v1_memory_path, "/process_api/abc");
  EXPECT_EQ(v1.v2_path, "/");
  const ProcessCgroups combined = ParseProcSelfCgroup("5:cpuset,memory:/a:b\n");
  EXPECT_EQ(combined.v1_memory_path, "/a:b");  // the path may contain ':'
  EXPECT_FALSE(combined.v2_path.has_value());
}

TEST(HostMemoryTest, NoCgroupLimitGivesMemTotal) {
  EXPECT_EQ(AvailableHostMemoryBytes(Files({{"/proc/meminfo", kMeminfo}})),
            uint64_t{24684092} * 1024);
  EXPECT_EQ(AvailableHostMemoryBytes(Files({})), 0u);  // unreadable meminfo
}

TEST(HostMemoryTest, FreeMemoryIsMemAvailableBoundByCgroupHeadroom) {
  EXPECT_EQ(ParseMeminfoBytes(kMeminfo, "MemAvailable:"), uint64_t{23060360} * 1024);
  EXPECT_EQ(ParseMeminfoBytes(kMeminfo, "SwapTotal:"), std::nullopt);
  EXPECT_EQ(FreeHostMemoryBytes(Files({{"/proc/meminfo", kMeminfo}})), uint64_t{23060360} * 1024);
  EXPECT_EQ(FreeHostMemoryBytes(Files({{"/proc/meminfo", "MemTotal: 1 kB\n"}})), 0u);
  // cgroup v2: the parent's limit - usage (3 GiB - 2 GiB) binds tighter than the child's.
  EXPECT_EQ(FreeHostMemoryBytes(Files({
                {"/proc/meminfo", kMeminfo},
                {"/proc/self/cgroup", "0::/a/b\n"},
                {"/sys/fs/cgroup/a/b/memory.max", std::to_string(8 * kGiB) + "\n"},
                {"/sys/fs/cgroup/a/b/memory.current", std::to_string(2 * kGiB) + "\n"},
                {"/sys/fs/cgroup/a/memory.max", std::to_string(3 * kGiB) + "\n"},
                {"/sys/fs/cgroup/a/memory.current", std::to_string(2 * kGiB) + "\n"},
            })),
            kGiB);
  // cgroup v1, usage above the limit (possible transiently): nothing is free.
  EXPECT_EQ(FreeHostMemoryBytes(Files({
                {"/proc/meminfo", kMeminfo},
                {"/proc/self/cgroup", "4:memory:/job\n"},
                {"/sys/fs/cgroup/memory/job/memory.limit_in_bytes", std::to_string(kGiB)},
                {"/sys/fs/cgroup/memory/job/memory.usage_in_bytes", std::to_string(2 * kGiB)},
            })),
            0u);
}

TEST(HostMemoryTest, CgroupV2LimitOfTheProcessOrAnAncestor) {
  const std::string meminfo = "MemTotal: 67108864 kB\n";  // 64 GiB
  EXPECT_EQ(AvailableHostMemoryBytes(Files({
                {"/proc/meminfo", meminfo},
                {"/proc/self/cgroup", "0::/user.slice/job\n"},
                {"/sys/fs/cgroup/user.slice/job/memory.max", "max\n"},
                {"/sys/fs/cgroup/user.slice/memory.max", "8589934592\n"},
            })),
            8 * kGiB);
  // Namespaced container: the process sees "/" and the root file holds its limit.
  EXPECT_EQ(AvailableHostMemoryBytes(Files({
                {"/proc/meminfo", meminfo},
                {"/proc/self/cgroup", "0::/\n"},
                {"/sys/fs/cgroup/memory.max", "2147483648\n"},
            })),
            2 * kGiB);
  // A limit above physical memory does not raise the result.
  EXPECT_EQ(AvailableHostMemoryBytes(Files({
                {"/proc/meminfo", meminfo},
                {"/proc/self/cgroup", "0::/\n"},
                {"/sys/fs/cgroup/memory.max", "137438953472\n"},
            })),
            64 * kGiB);
}

TEST(HostMemoryTest, CgroupV1Limit) {
  const std::string meminfo = "MemTotal: 67108864 kB\n";
  EXPECT_EQ(AvailableHostMemoryBytes(Files({
                {"/proc/meminfo", meminfo},
                {"/proc/self/cgroup", "4:memory:/docker/abc\n"},
                {"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "3221225472\n"},
                {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n"},
            })),
            3 * kGiB);
  // v1's "unlimited" is a number near 2^63: MemTotal stays.
  EXPECT_EQ(AvailableHostMemoryBytes(Files({
                {"/proc/meminfo", meminfo},
                {"/proc/self/cgroup", "4:memory:/\n"},
                {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n"},
            })),
            64 * kGiB);
}

TEST(HostMemoryTest, ThisHost) {
  const uint64_t bytes = AvailableHostMemoryBytes();
  std::ifstream in("/proc/meminfo");
  std::stringstream meminfo;
  meminfo << in.rdbuf();
  const std::optional<uint64_t> total = ParseMemTotalBytes(meminfo.str());
  ASSERT_TRUE(total.has_value());
  EXPECT_GT(bytes, 0u);
  EXPECT_LE(bytes, *total);  // cgroup limits can only lower it
}

}  // namespace
}  // namespace pagellm
