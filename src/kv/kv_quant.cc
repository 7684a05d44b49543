#include "kv/kv_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/half.h"
#include "pagellm/check.h"

namespace pagellm {
namespace {

constexpr float kF16Max = 65504.0f;
constexpr float kBf16Max = 3.3895313892515355e38f;

// NaN -> 0, +-inf and out-of-range -> +-limit.
float Saturate(float x, float limit) {
  if (std::isnan(x)) return 0.0f;
  return std::clamp(x, -limit, limit);
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Encodes |x| (finite, >= 0) into an fp8 magnitude with `man_bits` mantissa bits, exponent bias
// `bias`, largest finite magnitude code `max_code`. Round to nearest even, saturating.
uint8_t EncodeFp8Magnitude(float a, int man_bits, int bias, uint8_t max_code) {
  const float min_normal = std::ldexp(1.0f, 1 - bias);
  if (a < min_normal) {
    // Subnormal: value = m x 2^(1 - bias - man_bits); m = 2^man_bits means the smallest normal.
    const float m = std::nearbyint(std::ldexp(a, bias - 1 + man_bits));
    return static_cast<uint8_t>(m);
  }
  uint32_t b = Bits(a);
  const int shift = 23 - man_bits;
  b += ((1u << (shift - 1)) - 1) + ((b >> shift) & 1u);  // round to nearest even
  const int64_t code = static_cast<int64_t>(b >> shift) - (int64_t{127 - bias} << man_bits);
  return static_cast<uint8_t>(std::min<int64_t>(code, max_code));
}

float DecodeFp8(uint8_t b, int man_bits, int bias) {
  const int e = (b & 0x7F) >> man_bits;
  const int m = b & ((1 << man_bits) - 1);
  const float mag = e == 0
                        ? std::ldexp(static_cast<float>(m), 1 - bias - man_bits)
                        : std::ldexp(1.0f + std::ldexp(static_cast<float>(m), -man_bits), e - bias);
  return (b & 0x80) ? -mag : mag;
}

// Asymmetric integer quantisation with `levels` - 1 steps. Writes codes through `put`.
template <typename Put>
void QuantizeAsymmetric(const float* x, int n, int levels, uint8_t* meta, Put put) {
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (int i = 0; i < n; ++i) {
    const float v = Saturate(x[i], kF16Max);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  // Scale and zero are stored as fp16; quantise with the stored (rounded) values so decoding
  // reproduces exactly what was encoded.
  const uint16_t zero_h = F32ToF16(lo);
  const float zero = F16ToF32(zero_h);
  float scale = std::min((hi - zero) / static_cast<float>(levels - 1), kF16Max);
  uint16_t scale_h = F32ToF16(scale);
  scale = F16ToF32(scale_h);
  // The rounded scale may cover slightly less than the range: let the top code clip.
  const float inv = scale > 0 ? 1.0f / scale : 0.0f;
  for (int i = 0; i < n; ++i) {
    const float v = Saturate(x[i], kF16Max);
    const float q = std::nearbyint((v - zero) * inv);
    put(i, static_cast<uint8_t>(std::clamp(q, 0.0f, static_cast<float>(levels - 1))));
  }
  std::memcpy(meta, &scale_h, 2);
  std::memcpy(meta + 2, &zero_h, 2);
}

void ReadMeta(const uint8_t* meta, float* scale, float* zero) {
  uint16_t s, z;
  std::memcpy(&s, meta, 2);
  std::memcpy(&z, meta + 2, 2);
  *scale = F16ToF32(s);
  *zero = F16ToF32(z);
}

}  // namespace

KvCacheDtype CanonicalKvStorageDtype(KvCacheDtype dtype) {
  CHECK(dtype != KvCacheDtype::kAuto) << "KV cache dtype 'auto' must be resolved first";
  return dtype == KvCacheDtype::kFp8 ? KvCacheDtype::kFp8E4m3 : dtype;
}

int KvRowValueBytes(KvCacheDtype dtype, int head_dim) {
  switch (CanonicalKvStorageDtype(dtype)) {
    case KvCacheDtype::kFloat32:
      return 4 * head_dim;
    case KvCacheDtype::kBFloat16:
    case KvCacheDtype::kFloat16:
      return 2 * head_dim;
    case KvCacheDtype::kFp8E4m3:
    case KvCacheDtype::kFp8E5m2:
    case KvCacheDtype::kInt8:
      return head_dim;
    case KvCacheDtype::kInt4:
      CHECK(head_dim % 2 == 0) << "int4 KV cache needs an even head_dim";
      return head_dim / 2;
    default:
      break;
  }
  CHECK(false) << "unknown KV cache dtype";
  return 0;
}

int KvRowBytes(KvCacheDtype dtype, int head_dim) {
  const KvCacheDtype d = CanonicalKvStorageDtype(dtype);
  const bool has_meta = d == KvCacheDtype::kInt8 || d == KvCacheDtype::kInt4;
  return KvRowValueBytes(d, head_dim) + (has_meta ? kKvIntMetaBytes : 0);
}

bool KvDtypeIsQuantized(KvCacheDtype dtype) {
  switch (CanonicalKvStorageDtype(dtype)) {
    case KvCacheDtype::kFp8E4m3:
    case KvCacheDtype::kFp8E5m2:
    case KvCacheDtype::kInt8:
    case KvCacheDtype::kInt4:
      return true;
    default:
      return false;
  }
}

bool KvDtypeUsesKRangeSmoothing(KvCacheDtype dtype) {
  return dtype == KvCacheDtype::kInt8 || dtype == KvCacheDtype::kInt4;
}

bool KvRowsRotated(KvCacheDtype dtype, int head_dim) {
  return dtype == KvCacheDtype::kInt4 && head_dim >= 2 && (head_dim & (head_dim - 1)) == 0;
}

uint8_t FloatToFp8E4m3(float x) {
  const float v = Saturate(x, kFp8E4m3Max);
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  return sign | EncodeFp8Magnitude(std::fabs(v), 3, 7, 0x7E);
}

uint8_t FloatToFp8E5m2(float x) {
  const float v = Saturate(x, kFp8E5m2Max);
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  return sign | EncodeFp8Magnitude(std::fabs(v), 2, 15, 0x7B);
}

float Fp8E4m3ToFloat(uint8_t b) {
  if ((b & 0x7F) == 0x7F) return std::numeric_limits<float>::quiet_NaN();
  return DecodeFp8(b, 3, 7);
}

float Fp8E5m2ToFloat(uint8_t b) {
  if ((b & 0x7F) > 0x7C) return std::numeric_limits<float>::quiet_NaN();
  if ((b & 0x7F) == 0x7C) return (b & 0x80) ? -INFINITY : INFINITY;  // never encoded
  return DecodeFp8(b, 2, 15);
}

void QuantizeKvRow(KvCacheDtype dtype, const float* x, int d, float layer_scale, uint8_t* dst) {
  switch (CanonicalKvStorageDtype(dtype)) {
    case KvCacheDtype::kFloat32:
      for (int i = 0; i < d; ++i) {
        const float v = Saturate(x[i], std::numeric_limits<float>::max());
        std::memcpy(dst + 4 * i, &v, 4);
      }
      return;
    case KvCacheDtype::kBFloat16:
      for (int i = 0; i < d; ++i) {
        const uint16_t h = F32ToBf16(Saturate(x[i], kBf16Max));
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case KvCacheDtype::kFloat16:
      for (int i = 0; i < d; ++i) {
        const uint16_t h = F32ToF16(Saturate(x[i], kF16Max));
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case KvCacheDtype::kFp8E4m3: {
      const float inv = 1.0f / layer_scale;
      for (int i = 0; i < d; ++i) dst[i] = FloatToFp8E4m3(x[i] * inv);
      return;
    }
    case KvCacheDtype::kFp8E5m2:
      for (int i = 0; i < d; ++i) dst[i] = FloatToFp8E5m2(x[i]);
      return;
    case KvCacheDtype::kInt8:
      QuantizeAsymmetric(x, d, 256, dst + d, [&](int i, uint8_t q) { dst[i] = q; });
      return;
    case KvCacheDtype::kInt4: {
      const int half = d / 2;
      std::memset(dst, 0, half);
      QuantizeAsymmetric(x, d, 16, dst + half, [&](int i, uint8_t q) {
        if (i < half)
          dst[i] |= q;
        else
          dst[i - half] |= static_cast<uint8_t>(q << 4);
      });
      return;
    }
    default:
      CHECK(false) << "unknown KV cache dtype";
  }
}

void DequantizeKvRow(KvCacheDtype dtype, const uint8_t* src, int d, float layer_scale, float* out) {
  switch (CanonicalKvStorageDtype(dtype)) {
    case KvCacheDtype::kFloat32:
      std::memcpy(out, src, 4 * static_cast<size_t>(d));
      return;
    case KvCacheDtype::kBFloat16:
      for (int i = 0; i < d; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = Bf16ToF32(h);
      }
      return;
    case KvCacheDtype::kFloat16:
      for (int i = 0; i < d; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = F16ToF32(h);
      }
      return;
    case KvCacheDtype::kFp8E4m3:
      for (int i = 0; i < d; ++i) out[i] = Fp8E4m3ToFloat(src[i]) * layer_scale;
      return;
    case KvCacheDtype::kFp8E5m2:
      for (int i = 0; i < d; ++i) out[i] = Fp8E5m2ToFloat(src[i]);
      return;
    case KvCacheDtype::kInt8: {
      float scale, zero;
      ReadMeta(src + d, &scale, &zero);
      for (int i = 0; i < d; ++i) out[i] = std::fma(static_cast<float>(src[i]), scale, zero);
      return;
    }
    case KvCacheDtype::kInt4: {
      const int half = d / 2;
      float scale, zero;
      ReadMeta(src + half, &scale, &zero);
      for (int i = 0; i < half; ++i) {
        out[i] = std::fma(static_cast<float>(src[i] & 0xF), scale, zero);
        out[i + half] = std::fma(static_cast<float>(src[i] >> 4), scale, zero);
      }
      return;
    }
    default:
      CHECK(false) << "unknown KV cache dtype";
  }
}

void HadamardRotate(float* x, int n) {
  for (int h = 1; h < n; h *= 2) {
    for (int i = 0; i < n; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  const float norm = 1.0f / std::sqrt(static_cast<float>(n));
  for (int i = 0; i < n; ++i) x[i] *= norm;
}

float MaxAbs(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    if (std::fabs(x[i]) > m) m = std::fabs(x[i]);  // NaN compares false: ignored
  return m;
}

}  // namespace pagellm
