// Runtime detection of the x86 SIMD features the kernels dispatch on.
#pragma once

#include <string>

namespace pagellm {

enum class SimdLevel { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

struct CpuFeatures {
  bool avx2 = false;    // AVX2 + FMA + F16C
  bool avx512 = false;  // AVX-512 F/BW/DQ/VL
  bool avx512_bf16 = false;
  bool avx512_vnni = false;
  bool avx_vnni = false;
  bool gfni = false;         // GF(2) affine byte transforms (vgf2p8affineqb)
  bool avx512_vbmi = false;  // byte permutes across a register (vpermb)
};

const CpuFeatures& GetCpuFeatures();
// Best level the CPU supports, capped by env PAGELLM_SIMD=scalar|avx2|avx512 when set.
SimdLevel ActiveSimdLevel();
const char* SimdLevelName(SimdLevel level);
std::string CpuFeaturesString();

}  // namespace pagellm
