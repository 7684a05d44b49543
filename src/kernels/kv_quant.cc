#include "kernels/kv_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/half.h"
#include "kernels/ops.h"
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

// Scale and zero point of one candidate range [lo, hi], rounded to fp16 as stored: decoding
// reproduces exactly what was encoded.
struct IntRange {
  uint16_t scale_h, zero_h;
  float scale, zero, inv;
};

IntRange MakeRange(float lo, float hi, int levels) {
  IntRange r;
  r.zero_h = F32ToF16(lo);
  r.zero = F16ToF32(r.zero_h);
  r.scale_h = F32ToF16(std::min((hi - r.zero) / static_cast<float>(levels - 1), kF16Max));
  r.scale = F16ToF32(r.scale_h);
  // The rounded scale may cover slightly less than the range: let the top code clip.
  r.inv = r.scale > 0 ? 1.0f / r.scale : 0.0f;
  return r;
}

// Round to nearest even of (v - zero) / scale, clamped to [0, levels - 1]. Clamping first keeps
// the argument in [0, 255], where adding and subtracting 1.5 x 2^23 rounds exactly as
// nearbyint does in the default rounding mode, without its libm call (the int4 search below
// evaluates this a few hundred times per row).
inline float Code(float v, const IntRange& r, int levels) {
  const float t = std::clamp((v - r.zero) * r.inv, 0.0f, static_cast<float>(levels - 1));
  return (t + 0x1.8p23f) - 0x1.8p23f;
}

// Clipping search steps per side for int4 (see QuantizeAsymmetric); fewer for long rows, where
// each candidate costs more and the row's extremes are less extreme relative to its spread.
int Int4ClipSteps(int n) {
  return n <= 32 ? 10 : 4;
}

// Asymmetric integer quantisation with `levels` - 1 steps. Writes codes through `put`.
// 8-bit rows use the row's [min, max]. 4-bit rows (16 levels, where the step is coarse enough
// for clipping to pay) search the range: the lower and the upper end each move inwards by 0% to
// 10% of the row's range, in Int4ClipSteps equal steps per side, all pairs, and the pair with the
// smallest squared reconstruction error over the row (with fp16-rounded scale and zero, as
// decoded) wins; ties keep the earlier, less clipped pair, so [min, max] stays unless something
// is strictly better. Decoding is unchanged (code x scale + zero). On stories260K this cuts
// int4's perplexity cost by about a third (float64 emulation: +4.0% -> +2.8% on 20 stories).
template <typename Put>
void QuantizeAsymmetric(const float* x, int n, int levels, uint8_t* meta, Put put) {
  thread_local std::vector<float> sat;
  sat.resize(static_cast<size_t>(n));
  float* v = sat.data();
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (int i = 0; i < n; ++i) {
    v[i] = Saturate(x[i], kF16Max);
    lo = std::min(lo, v[i]);
    hi = std::max(hi, v[i]);
  }
  IntRange best = MakeRange(lo, hi, levels);
  if (levels == 16 && hi > lo) {
    // Squared error of a candidate (mul + add, not the decoder's fma: fma is a libm call at
    // this file's baseline ISA, and the ranking does not need the last bit). Four partial sums
    // let the loop vectorise and pipeline.
    auto error = [&](const IntRange& r) {
      float e[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      int i = 0;
      for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; ++k) {
          const float d = Code(v[i + k], r, levels) * r.scale + r.zero - v[i + k];
          e[k] += d * d;
        }
      for (; i < n; ++i) {
        const float d = Code(v[i], r, levels) * r.scale + r.zero - v[i];
        e[0] += d * d;
      }
      return (e[0] + e[1]) + (e[2] + e[3]);
    };
    const int steps = Int4ClipSteps(n);
    const float unit = 0.1f * (hi - lo) / static_cast<float>(steps);
    float best_error = error(best);
    for (int a = 0; a <= steps; ++a) {
      for (int b = 0; b <= steps; ++b) {
        if (a == 0 && b == 0) continue;
        const IntRange r =
            MakeRange(lo + unit * static_cast<float>(a), hi - unit * static_cast<float>(b), levels);
        const float e = error(r);
        if (e < best_error) {
          best_error = e;
          best = r;
        }
      }
    }
  }
  for (int i = 0; i < n; ++i) put(i, static_cast<uint8_t>(Code(v[i], best, levels)));
  std::memcpy(meta, &best.scale_h, 2);
  std::memcpy(meta + 2, &best.zero_h, 2);
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
    case KvCacheDtype::kFloat16: {
      // Saturate + F32ToF16, vectorised (ops.h): one row per token, layer and KV head.
      alignas(64) uint16_t h[512];
      for (int i0 = 0; i0 < d; i0 += 512) {
        const int n = std::min(512, d - i0);
        SaturateToF16(x + i0, n, h);
        std::memcpy(dst + 2 * i0, h, 2 * static_cast<size_t>(n));
      }
      return;
    }
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
