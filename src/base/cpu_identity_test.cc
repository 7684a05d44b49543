#include "base/cpu_identity.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace pagellm {
namespace {

TEST(CpuIdentity, ClassifiesTheGenerationsTheTuningTableNames) {
  // AMD: family 0x19 is Zen 3 (no AVX-512) and Zen 4; 0x1A is Zen 5.
  EXPECT_EQ(ClassifyMicroarch("AuthenticAMD", 25, true), CpuMicroarch::kZen4);    // Genoa
  EXPECT_EQ(ClassifyMicroarch("AuthenticAMD", 25, false), CpuMicroarch::kOther);  // Milan
  EXPECT_EQ(ClassifyMicroarch("AuthenticAMD", 26, true), CpuMicroarch::kZen5);    // Turin
  EXPECT_EQ(ClassifyMicroarch("AuthenticAMD", 23, false), CpuMicroarch::kOther);  // Zen 2
  EXPECT_EQ(ClassifyMicroarch("GenuineIntel", 6, true), CpuMicroarch::kIntelAvx512);
  EXPECT_EQ(ClassifyMicroarch("GenuineIntel", 6, false), CpuMicroarch::kOther);
}

// The kernel's own decoding of CPUID (/proc/cpuinfo) is the independent reference for the
// family / model / stepping arithmetic.
TEST(CpuIdentity, AgreesWithProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo";
  int family = -1, model = -1, stepping = -1;
  std::string vendor, line;
  while (std::getline(in, line) && !line.empty()) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "vendor_id") vendor = value;
    if (key == "cpu family") family = std::stoi(value);
    if (key == "model") model = std::stoi(value);
    if (key == "stepping") stepping = std::stoi(value);
  }
  if (family < 0) GTEST_SKIP() << "/proc/cpuinfo has no x86 fields";
  const CpuIdentity& id = GetCpuIdentity();
  EXPECT_EQ(id.vendor, vendor);
  EXPECT_EQ(id.family, family);
  EXPECT_EQ(id.model, model);
  EXPECT_EQ(id.stepping, stepping);
  EXPECT_FALSE(id.brand.empty());
  EXPECT_NE(CpuIdentityString().find(id.brand), std::string::npos);
}

}  // namespace
}  // namespace pagellm
