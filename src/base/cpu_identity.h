// Which CPU this is: vendor, family/model/stepping (CPUID leaf 1, with the extended fields
// folded in as the vendors define them), the brand string, and the microarchitecture that the
// kernel tuning table (kernels/kernel_tuning.h) is keyed by. Feature flags alone cannot tell a
// Zen 4 core (512-bit operations in two 256-bit halves) from a Zen 5 one (full width), which
// have the same ISA and different costs.
#pragma once

#include <string>

namespace pagellm {

enum class CpuMicroarch {
  kOther = 0,  // anything not below: the defaults
  kZen4,       // AMD family 0x19 with AVX-512 (Genoa, Bergamo, Raphael, Phoenix)
  kZen5,       // AMD family 0x1A (Turin, Granite Ridge, Strix)
  kIntelAvx512,
};

struct CpuIdentity {
  std::string vendor;  // "AuthenticAMD", "GenuineIntel", ...
  std::string brand;   // e.g. "AMD EPYC 9R14 96-Core Processor" (trimmed)
  int family = 0;      // display family (base + extended when base is 0xF)
  int model = 0;       // display model (extended model folded in where defined)
  int stepping = 0;
  CpuMicroarch microarch = CpuMicroarch::kOther;
};

// Read once (CPUID); the microarch can be forced with env PAGELLM_CPU_MICROARCH=zen4|zen5|
// intel-avx512|other (A/B runs of the tuning table on one machine).
const CpuIdentity& GetCpuIdentity();
// Classifies a vendor / display family / AVX-512 presence (pure; tested). Families are whole
// generations here; the model only names the product.
CpuMicroarch ClassifyMicroarch(const std::string& vendor, int family, bool avx512);
const char* CpuMicroarchName(CpuMicroarch m);
// "zen4 (AuthenticAMD family 25 model 17 stepping 1: AMD EPYC ...)".
std::string CpuIdentityString();

}  // namespace pagellm
