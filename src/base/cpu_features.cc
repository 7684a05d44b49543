#include "base/cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace pagellm {

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__)
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    f.avx512_vnni = __builtin_cpu_supports("avx512vnni");
#if defined(__GNUC__) && __GNUC__ >= 12
    f.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
    f.avx_vnni = __builtin_cpu_supports("avxvnni");
#endif
    f.gfni = __builtin_cpu_supports("gfni");
    f.avx512_vbmi = __builtin_cpu_supports("avx512vbmi");
#endif
    return f;
  }();
  return features;
}

SimdLevel ActiveSimdLevel() {
  static const SimdLevel level = [] {
    const CpuFeatures& f = GetCpuFeatures();
    SimdLevel best = f.avx512 ? SimdLevel::kAvx512 : f.avx2 ? SimdLevel::kAvx2 : SimdLevel::kScalar;
    if (const char* env = std::getenv("PAGELLM_SIMD")) {
      SimdLevel cap = best;
      if (std::strcmp(env, "scalar") == 0) cap = SimdLevel::kScalar;
      if (std::strcmp(env, "avx2") == 0) cap = SimdLevel::kAvx2;
      if (std::strcmp(env, "avx512") == 0) cap = SimdLevel::kAvx512;
      if (cap < best) best = cap;
    }
    return best;
  }();
  return level;
}

const char* SimdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar:
      return "scalar";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kAvx512:
      return "avx512";
  }
  return "?";
}

std::string CpuFeaturesString() {
  const CpuFeatures& f = GetCpuFeatures();
  std::string s;
  if (f.avx2) s += "AVX2 ";
  if (f.avx512) s += "AVX512 ";
  if (f.avx512_vnni) s += "AVX512_VNNI ";
  if (f.avx512_bf16) s += "AVX512_BF16 ";
  if (f.avx_vnni) s += "AVX_VNNI ";
  if (f.gfni) s += "GFNI ";
  if (f.avx512_vbmi) s += "AVX512_VBMI ";
  if (!s.empty()) s.pop_back();
  return s;
}

}  // namespace pagellm
