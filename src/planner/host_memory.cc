#include "planner/host_memory.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

namespace pagellm {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::optional<uint64_t> ParseUnsigned(std::string_view s) {
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// "/a/b/c" -> {"/a/b/c", "/a/b", "/a", ""}: a limit on any ancestor also binds the process.
std::vector<std::string> SelfAndAncestors(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  std::vector<std::string> out;
  if (path == "/") path.clear();
  out.push_back(path);
  while (!path.empty()) {
    const size_t slash = path.rfind('/');
    path.resize(slash == std::string::npos ? 0 : slash);
    out.push_back(path);
  }
  return out;
}

std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

}  // namespace

std::optional<uint64_t> ParseMemTotalBytes(std::string_view meminfo) {
  return ParseMeminfoBytes(meminfo, "MemTotal:");
}

std::optional<uint64_t> ParseMeminfoBytes(std::string_view meminfo, std::string_view key) {
  size_t pos = 0;
  while (pos < meminfo.size()) {
    size_t eol = meminfo.find('\n', pos);
    if (eol == std::string_view::npos) eol = meminfo.size();
    std::string_view line = meminfo.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.substr(0, key.size()) != key) continue;
    line = Trim(line.substr(key.size()));
    // The kernel always reports kB (= 1024 bytes) here.
    constexpr std::string_view kUnit = "kB";
    if (line.size() < kUnit.size() || line.substr(line.size() - kUnit.size()) != kUnit) {
      return std::nullopt;
    }
    const std::optional<uint64_t> kib = ParseUnsigned(Trim(line.substr(0, line.size() - 2)));
    if (!kib) return std::nullopt;
    return *kib * 1024;
  }
  return std::nullopt;
}

std::optional<uint64_t> ParseCgroupLimitBytes(std::string_view text) {
  const std::string_view t = Trim(text);
  if (t == "max") return std::nullopt;
  return ParseUnsigned(t);
}

ProcessCgroups ParseProcSelfCgroup(std::string_view text) {
  ProcessCgroups out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    // hierarchy-id:controller-list:path; the path may itself contain ':'.
    const size_t c1 = line.find(':');
    if (c1 == std::string_view::npos) continue;
    const size_t c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, c1);
    const std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string path(line.substr(c2 + 1));
    if (id == "0" && controllers.empty()) {
      out.v2_path = path;
      continue;
    }
    size_t start = 0;
    while (start <= controllers.size()) {
      size_t comma = controllers.find(',', start);
      if (comma == std::string_view::npos) comma = controllers.size();
      if (controllers.substr(start, comma - start) == "memory") out.v1_memory_path = path;
      start = comma + 1;
    }
  }
  return out;
}

uint64_t AvailableHostMemoryBytes(const TextFileReader& read_file) {
  const std::optional<std::string> meminfo = read_file("/proc/meminfo");
  if (!meminfo) return 0;
  const std::optional<uint64_t> total = ParseMemTotalBytes(*meminfo);
  if (!total) return 0;
  uint64_t available = *total;

  auto apply_limit = [&](const std::string& file) {
    const std::optional<std::string> text = read_file(file);
    if (!text) return;
    const std::optional<uint64_t> limit = ParseCgroupLimitBytes(*text);
    if (limit && *limit > 0) available = std::min(available, *limit);
  };

  const std::optional<std::string> self = read_file("/proc/self/cgroup");
  const ProcessCgroups groups = self ? ParseProcSelfCgroup(*self) : ProcessCgroups{};
  // Inside a cgroup namespace the process's path may be "/" while the mount shows only its own
  // subtree; the root files of each mount are therefore always consulted as well.
  const std::string v2_root = "/sys/fs/cgroup";
  const std::string v1_root = "/sys/fs/cgroup/memory";
  for (const std::string& p : SelfAndAncestors(groups.v2_path.value_or("/"))) {
    apply_limit(v2_root + p + "/memory.max");
  }
  for (const std::string& p : SelfAndAncestors(groups.v1_memory_path.value_or("/"))) {
    apply_limit(v1_root + p + "/memory.limit_in_bytes");
  }
  return available;
}

uint64_t AvailableHostMemoryBytes() {
  return AvailableHostMemoryBytes(ReadWholeFile);
}

uint64_t FreeHostMemoryBytes(const TextFileReader& read_file) {
  const std::optional<std::string> meminfo = read_file("/proc/meminfo");
  if (!meminfo) return 0;
  const std::optional<uint64_t> host_free = ParseMeminfoBytes(*meminfo, "MemAvailable:");
  if (!host_free) return 0;
  uint64_t free = *host_free;

  // limit - usage of the cgroup and of each ancestor (a full parent binds its children).
  auto apply_group = [&](const std::string& limit_file, const std::string& usage_file) {
    const std::optional<std::string> limit_text = read_file(limit_file);
    if (!limit_text) return;
    const std::optional<uint64_t> limit = ParseCgroupLimitBytes(*limit_text);
    if (!limit || *limit == 0) return;
    const std::optional<std::string> usage_text = read_file(usage_file);
    const std::optional<uint64_t> usage =
        usage_text ? ParseUnsigned(Trim(*usage_text)) : std::nullopt;
    if (!usage) return;
    free = std::min(free, *limit > *usage ? *limit - *usage : uint64_t{0});
  };
  const std::optional<std::string> self = read_file("/proc/self/cgroup");
  const ProcessCgroups groups = self ? ParseProcSelfCgroup(*self) : ProcessCgroups{};
  const std::string v2_root = "/sys/fs/cgroup";
  const std::string v1_root = "/sys/fs/cgroup/memory";
  for (const std::string& p : SelfAndAncestors(groups.v2_path.value_or("/"))) {
    apply_group(v2_root + p + "/memory.max", v2_root + p + "/memory.current");
  }
  for (const std::string& p : SelfAndAncestors(groups.v1_memory_path.value_or("/"))) {
    apply_group(v1_root + p + "/memory.limit_in_bytes", v1_root + p + "/memory.usage_in_bytes");
  }
  return free;
}

uint64_t FreeHostMemoryBytes() {
  return FreeHostMemoryBytes(ReadWholeFile);
}

}  // namespace pagellm
