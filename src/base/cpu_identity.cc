#include "base/cpu_identity.h"

#include <cstdlib>
#include <cstring>

#include "base/cpu_features.h"
#include "fmt/format.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace pagellm {

CpuMicroarch ClassifyMicroarch(const std::string& vendor, int family, bool avx512) {
  if (vendor == "AuthenticAMD") {
    if (family == 0x1A) return CpuMicroarch::kZen5;
    // Family 0x19 is Zen 3 and Zen 4; only Zen 4 has AVX-512.
    if (family == 0x19 && avx512) return CpuMicroarch::kZen4;
    return CpuMicroarch::kOther;
  }
  if (vendor == "GenuineIntel" && avx512) return CpuMicroarch::kIntelAvx512;
  return CpuMicroarch::kOther;
}

const char* CpuMicroarchName(CpuMicroarch m) {
  switch (m) {
    case CpuMicroarch::kOther:
      return "other";
    case CpuMicroarch::kZen4:
      return "zen4";
    case CpuMicroarch::kZen5:
      return "zen5";
    case CpuMicroarch::kIntelAvx512:
      return "intel-avx512";
  }
  return "?";
}

namespace {

#if defined(__x86_64__)
std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\0')) s.pop_back();
  size_t b = 0;
  while (b < s.size() && s[b] == ' ') ++b;
  return s.substr(b);
}
#endif

CpuIdentity ReadIdentity() {
  CpuIdentity id;
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    char v[13];
    std::memcpy(v, &b, 4);
    std::memcpy(v + 4, &d, 4);
    std::memcpy(v + 8, &c, 4);
    v[12] = '\0';
    id.vendor = v;
  }
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    const int base_family = (a >> 8) & 0xF, base_model = (a >> 4) & 0xF;
    id.stepping = a & 0xF;
    id.family = base_family == 0xF ? base_family + ((a >> 20) & 0xFF) : base_family;
    // Intel folds the extended model in for families 6 and 15, AMD for 15 and above.
    const bool ext_model = base_family == 0xF || (base_family == 6 && id.vendor == "GenuineIntel");
    id.model = ext_model ? (((a >> 16) & 0xF) << 4) | base_model : base_model;
  }
  if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000004) {
    char brand[49] = {};
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
      unsigned r[4];
      __get_cpuid(0x80000002 + leaf, &r[0], &r[1], &r[2], &r[3]);
      std::memcpy(brand + 16 * leaf, r, 16);
    }
    id.brand = Trim(brand);
  }
#endif
  id.microarch = ClassifyMicroarch(id.vendor, id.family, GetCpuFeatures().avx512);
  if (const char* env = std::getenv("PAGELLM_CPU_MICROARCH")) {
    for (CpuMicroarch m : {CpuMicroarch::kOther, CpuMicroarch::kZen4, CpuMicroarch::kZen5,
                           CpuMicroarch::kIntelAvx512}) {
      if (std::strcmp(env, CpuMicroarchName(m)) == 0) id.microarch = m;
    }
  }
  return id;
}

}  // namespace

const CpuIdentity& GetCpuIdentity() {
  static const CpuIdentity id = ReadIdentity();
  return id;
}

std::string CpuIdentityString() {
  const CpuIdentity& id = GetCpuIdentity();
  return fmt::format("{} ({} family {} model {} stepping {}: {})", CpuMicroarchName(id.microarch),
                     id.vendor, id.family, id.model, id.stepping, id.brand);
}

}  // namespace pagellm
