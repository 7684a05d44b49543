// Quantizers of the GGUF-only block types (the inverse of dequantize_blocks.cc), written from
// the format definitions in quant_blocks.h. Each block or sub-block gets its parameters from a
// small search that minimises the squared error of the reconstruction, not from the range alone
// (round-to-nearest over the min/max grid loses a level at either end):
//   affine formats (Q4_1, Q5_1; the Q2_K / Q4_K / Q5_K sub-blocks): x ~ s * q + b, q in
//     [0, L]; for each candidate inverse scale (L + t/10) / (max - min), t in [-10, 10], codes
//     are rounded and (s, b) re-fit by least squares; the best pair wins;
//   symmetric formats (Q5_0; the Q3_K / Q6_K sub-blocks): x ~ s * q, q in [-n, n - 1]; the
//     element of largest magnitude is mapped to levels near -n, and s re-fit by least squares;
//   non-uniform IQ4_NL / IQ4_XS: x ~ d * v[q] over the 16 levels, same search.
// The super-block formats then quantise the sub-block scales (and mins) to their 4/6/8-bit
// fields against fp16 super-scales and re-round every code with the scales actually stored.
// All errors are unweighted (no importance matrix).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/quant_blocks.h"
#include "kernels/quantize.h"
#include "pagellm/check.h"

namespace pagellm {
namespace {

float RoundF16(float x) {
  return F16ToF32(F32ToF16(x));
}

int Clamp(int v, int lo, int hi) {
  return std::min(hi, std::max(lo, v));
}

// x ~ s * q + b, q in [0, levels]; b <= 0 when min_le_zero (the K formats subtract a non-
// negative min). Writes the codes for the returned (s, b) into q.
void FitAffine(const float* x, int n, int levels, bool min_le_zero, float* s_out, float* b_out) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
  if (min_le_zero) mn = std::min(mn, 0.0f);
  if (mx <= mn) {
    *s_out = 0.0f;
    *b_out = mn;
    return;
  }
  float best_s = (mx - mn) / static_cast<float>(levels), best_b = mn;
  double best_err = std::numeric_limits<double>::infinity();
  int q[256];
  for (int t = -10; t <= 10; ++t) {
    const float iscale = (static_cast<float>(levels) + 0.1f * static_cast<float>(t)) / (mx - mn);
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      q[i] = Clamp(static_cast<int>(std::lround((x[i] - mn) * iscale)), 0, levels);
      sq += q[i];
      sqq += static_cast<double>(q[i]) * q[i];
      sx += x[i];
      sqx += static_cast<double>(q[i]) * x[i];
    }
    // Least squares for (s, b) given the codes: [sqq sq; sq n] [s; b] = [sqx; sx].
    const double det = sqq * n - sq * sq;
    if (det <= 0) continue;
    double s = (sqx * n - sq * sx) / det;
    double b = (sqq * sx - sq * sqx) / det;
    if (min_le_zero && b > 0) {
      b = 0;
      s = sqq > 0 ? sqx / sqq : 0;
    }
    if (s <= 0) continue;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = s * q[i] + b - x[i];
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      best_s = static_cast<float>(s);
      best_b = static_cast<float>(b);
    }
  }
  *s_out = best_s;
  *b_out = best_b;
}

// x ~ s * level[q] over `count` ascending levels; returns s (either sign; 0 for a zero block).
// `extreme` is the level the largest-magnitude element is first mapped to.
float FitScaled(const float* x, int n, const float* levels, int count, float extreme) {
  float amax = 0, signed_max = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      signed_max = x[i];
    }
  if (amax == 0) return 0.0f;
  const float base = signed_max / extreme;
  float best_s = base;
  double best_err = std::numeric_limits<double>::infinity();
  for (int t = -12; t <= 12; ++t) {
    const float s = base * (1.0f + 0.015f * static_cast<float>(t));
    const float inv = 1.0f / s;
    double sxv = 0, svv = 0;
    for (int i = 0; i < n; ++i) {
      const float v = x[i] * inv;
      const float* hi = std::lower_bound(levels, levels + count, v);
      float lv;
      if (hi == levels) {
        lv = levels[0];
      } else if (hi == levels + count) {
        lv = levels[count - 1];
      } else {
        lv = (v - hi[-1] <= *hi - v) ? hi[-1] : *hi;
      }
      sxv += double{x[i]} * lv;
      svv += double{lv} * lv;
    }
    if (svv == 0) continue;
    const double sfit = sxv / svv;
    // Error of the refit scale with these codes: sum x^2 - sxv^2 / svv (x^2 is common).
    const double err = -sxv * sxv / svv;
    if (err < best_err && sfit != 0) {
      best_err = err;
      best_s = static_cast<float>(sfit);
    }
  }
  return best_s;
}

// Index of the level of `levels` (ascending, count) nearest to v.
int NearestLevel(float v, const float* levels, int count) {
  const float* hi = std::lower_bound(levels, levels + count, v);
  if (hi == levels) return 0;
  if (hi == levels + count) return count - 1;
  return static_cast<int>((v - hi[-1] <= *hi - v) ? (hi - 1 - levels) : (hi - levels));
}

// Integer levels lo..hi as floats.
struct IntLevels {
  float v[64];
  int count;
  IntLevels(int lo, int hi) : count(hi - lo + 1) {
    for (int i = 0; i < count; ++i) v[i] = static_cast<float>(lo + i);
  }
};

int RoundCode(float x, float scale, int lo, int hi) {
  if (scale == 0) return Clamp(0, lo, hi);
  return Clamp(static_cast<int>(std::lround(x / scale)), lo, hi);
}

const float* Iq4Levels() {
  static const float* levels = [] {
    static float v[16];
    for (int i = 0; i < 16; ++i) v[i] = kIq4NlValues[i];
    return v;
  }();
  return levels;
}

// Sub-block scales s_j (and mins m_j >= 0) of a K super-block as `bits`-bit unsigned fields
// against fp16 super-scales d and dmin: field = round(s_j / d), d = max s_j / (2^bits - 1).
void QuantizeSubScales(const float* s, int count, int bits, uint16_t* d_bits, int* fields) {
  const int top = (1 << bits) - 1;
  float mx = 0;
  for (int j = 0; j < count; ++j) mx = std::max(mx, s[j]);
  const float d = RoundF16(mx / static_cast<float>(top));
  *d_bits = F32ToF16(mx / static_cast<float>(top));
  for (int j = 0; j < count; ++j) fields[j] = d > 0 ? RoundCode(s[j], d, 0, top) : 0;
}

// Affine K super-block (Q2_K: 16 x 16, 2-bit codes, 4-bit fields; Q4_K / Q5_K: 8 x 32, 4 or
// 5-bit codes, 6-bit fields): codes [256], fields sc/m [sub-blocks], d and dmin.
void AffineSuperBlock(const float* x, int sub, int code_bits, int field_bits, int* q, int* sc,
                      int* m, uint16_t* d, uint16_t* dmin) {
  const int subs = 256 / sub;
  const int levels = (1 << code_bits) - 1;
  float s[16], mins[16];
  for (int j = 0; j < subs; ++j) {
    float b;
    FitAffine(x + j * sub, sub, levels, /*min_le_zero=*/true, &s[j], &b);
    mins[j] = -b;
  }
  QuantizeSubScales(s, subs, field_bits, d, sc);
  QuantizeSubScales(mins, subs, field_bits, dmin, m);
  const float df = F16ToF32(*d), dminf = F16ToF32(*dmin);
  for (int j = 0; j < subs; ++j) {
    const float scale = df * static_cast<float>(sc[j]), mn = dminf * static_cast<float>(m[j]);
    for (int i = 0; i < sub; ++i) q[j * sub + i] = RoundCode(x[j * sub + i] + mn, scale, 0, levels);
  }
}

// Signed sub-block scales as fields in [lo, hi] against an fp16 super-scale d chosen so that
// the largest-magnitude scale maps to `extreme` (lo or hi).
void QuantizeSignedScales(const float* s, int count, int lo, int hi, uint16_t* d_bits,
                          int* fields) {
  float amax = 0, signed_max = 0;
  for (int j = 0; j < count; ++j)
    if (std::fabs(s[j]) > amax) {
      amax = std::fabs(s[j]);
      signed_max = s[j];
    }
  const float raw = amax == 0 ? 0.0f : signed_max / static_cast<float>(lo);
  *d_bits = F32ToF16(raw);
  const float d = F16ToF32(*d_bits);
  for (int j = 0; j < count; ++j) fields[j] = d != 0 ? RoundCode(s[j], d, lo, hi) : 0;
}

}  // namespace

void QuantizeRowQ4_1(const float* x, uint8_t* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    BlockQ4_1 blk{};
    float s, off;
    FitAffine(x, 32, 15, false, &s, &off);
    blk.d = F32ToF16(s);
    blk.m = F32ToF16(off);
    const float d = F16ToF32(blk.d), m = F16ToF32(blk.m);
    for (int j = 0; j < 16; ++j) {
      const int lo = RoundCode(x[j] - m, d, 0, 15), hi = RoundCode(x[j + 16] - m, d, 0, 15);
      blk.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
    std::memcpy(y + b * sizeof(blk), &blk, sizeof(blk));
  }
}

namespace {
void PackQ5(const int* q, uint8_t* qh4, uint8_t* qs) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 15) | ((q[j + 16] & 15) << 4));
    qh |= static_cast<uint32_t>(q[j] >> 4) << j;
    qh |= static_cast<uint32_t>(q[j + 16] >> 4) << (j + 16);
  }
  std::memcpy(qh4, &qh, 4);
}
}  // namespace

void QuantizeRowQ5_0(const float* x, uint8_t* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  static const IntLevels levels(-16, 15);
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    BlockQ5_0 blk{};
    blk.d = F32ToF16(FitScaled(x, 32, levels.v, levels.count, -16.0f));
    const float d = F16ToF32(blk.d);
    int q[32];
    for (int i = 0; i < 32; ++i) q[i] = RoundCode(x[i], d, -16, 15) + 16;
    PackQ5(q, blk.qh, blk.qs);
    std::memcpy(y + b * sizeof(blk), &blk, sizeof(blk));
  }
}

void QuantizeRowQ5_1(const float* x, uint8_t* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    BlockQ5_1 blk{};
    float s, off;
    FitAffine(x, 32, 31, false, &s, &off);
    blk.d = F32ToF16(s);
    blk.m = F32ToF16(off);
    const float d = F16ToF32(blk.d), m = F16ToF32(blk.m);
    int q[32];
    for (int i = 0; i < 32; ++i) q[i] = RoundCode(x[i] - m, d, 0, 31);
    PackQ5(q, blk.qh, blk.qs);
    std::memcpy(y + b * sizeof(blk), &blk, sizeof(blk));
  }
}

void QuantizeRowIQ4_NL(const float* x, uint8_t* y, int64_t n) {
  CHECK_EQ(n % 32, 0);
  const float* levels = Iq4Levels();
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    BlockIQ4_NL blk{};
    blk.d = F32ToF16(FitScaled(x, 32, levels, 16, -127.0f));
    const float d = F16ToF32(blk.d);
    for (int j = 0; j < 16; ++j) {
      const int lo = d != 0 ? NearestLevel(x[j] / d, levels, 16) : 8;
      const int hi = d != 0 ? NearestLevel(x[j + 16] / d, levels, 16) : 8;
      blk.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
    std::memcpy(y + b * sizeof(blk), &blk, sizeof(blk));
  }
}

void QuantizeRowQ2_K(const float* x, uint8_t* y, int64_t n) {
  CHECK_EQ(n % 256, 0);
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    BlockQ2_K blk{};
    int q[256], sc[16], m[16];
    AffineSuperBlock(x, 16, 2, 4, q, sc, m, &blk.d, &blk.dmin);
    for (int j = 0; j < 16; ++j) blk.scales[j] = static_cast<uint8_t>(sc[j] | (m[j] << 4));
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      blk.qs[32 * h + l] |= static_cast<uint8_t>(q[e] << (2 * k));
    }
    std::memcpy(y + b * sizeof(blk), &blk, sizeof(blk));
  }
}

void QuantizeRowQ3_K(const float* x, uint8_t* y, int64_t n) {
  CHECK_EQ(n % 256, 0);
  static const IntLevels levels(-4, 3);
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    BlockQ3_K blk{};
    float s[16];
    for (int j = 0; j < 16; ++j) s[j] = FitScaled(x + 16 * j, 16, levels.v, levels.count, -4.0f);
    int field[16];
    QuantizeSignedScales(s, 16, -32, 31, &blk.d, field);
    const float d = F16ToF32(blk.d);
    for (int j = 0; j < 16; ++j) {
      const int u = field[j] + 32;
      blk.scales[j % 8] |= static_cast<uint8_t>((u & 15) << (j < 8 ? 0 : 4));
      blk.scales[8 + j % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (j / 4)));
    }
    for (int e = 0; e < 256; ++e) {
      const int j = e / 16;
      const int q3 = RoundCode(x[e], d * static_cast<float>(field[j]), -4, 3) + 4;
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      blk.qs[32 * h + l] |= static_cast<uint8_t>((q3 & 3) << (2 * k));
      blk.hmask[l] |= static_cast<uint8_t>((q3 >> 2) << (4 * h + k));
    }
    std::memcpy(y + b * sizeof(blk), &blk, sizeof(blk));
  }
}

namespace {
// The 12 scale bytes of Q4_K / Q5_K from 6-bit scales and mins (KScaleMin's inverse).
void PackKScales(const int* sc, const int* m, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}
}  // namespace

void QuantizeRowQ4_K(const float* x, uint8_t* y, int64_t n) {
  CHECK_EQ(n % 256, 0);
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    BlockQ4_K blk{};
    int q[256], sc[8], m[8];
    AffineSuperBlock(x, 32, 4, 6, q, sc, m, &blk.d, &blk.dmin);
    PackKScales(sc, m, blk.scales);
    for (int e = 0; e < 256; ++e) {
      const int c = e / 64, l = e % 32, hi = (e % 64) / 32;
      blk.qs[32 * c + l] |= static_cast<uint8_t>(q[e] << (4 * hi));
    }
    std::memcpy(y + b * sizeof(blk), &blk, sizeof(blk));
  }
}

void QuantizeRowQ5_K(const float* x, uint8_t* y, int64_t n) {
  CHECK_EQ(n % 256, 0);
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    BlockQ5_K blk{};
    int q[256], sc[8], m[8];
    AffineSuperBlock(x, 32, 5, 6, q, sc, m, &blk.d, &blk.dmin);
    PackKScales(sc, m, blk.scales);
    for (int e = 0; e < 256; ++e) {
      const int c = e / 64, l = e % 32, hi = (e % 64) / 32;
      blk.qs[32 * c + l] |= static_cast<uint8_t>((q[e] & 15) << (4 * hi));
      blk.qh[l] |= static_cast<uint8_t>((q[e] >> 4) << (2 * c + hi));
    }
    std::memcpy(y + b * sizeof(blk), &blk, sizeof(blk));
  }
}

void QuantizeRowQ6_K(const float* x, uint8_t* y, int64_t n) {
  CHECK_EQ(n % 256, 0);
  static const IntLevels levels(-32, 31);
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    BlockQ6_K blk{};
    float s[16];
    for (int j = 0; j < 16; ++j) s[j] = FitScaled(x + 16 * j, 16, levels.v, levels.count, -32.0f);
    int field[16];
    QuantizeSignedScales(s, 16, -128, 127, &blk.d, field);
    const float d = F16ToF32(blk.d);
    for (int j = 0; j < 16; ++j) blk.scales[j] = static_cast<int8_t>(field[j]);
    for (int e = 0; e < 256; ++e) {
      const int q6 = RoundCode(x[e], d * static_cast<float>(field[e / 16]), -32, 31) + 32;
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      blk.ql[64 * h + l + 32 * (k & 1)] |= static_cast<uint8_t>((q6 & 15) << (4 * (k >> 1)));
      blk.qh[32 * h + l] |= static_cast<uint8_t>((q6 >> 4) << (2 * k));
    }
    std::memcpy(y + b * sizeof(blk), &blk, sizeof(blk));
  }
}

void QuantizeRowIQ4_XS(const float* x, uint8_t* y, int64_t n) {
  CHECK_EQ(n % 256, 0);
  const float* levels = Iq4Levels();
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    BlockIQ4_XS blk{};
    float s[8];
    for (int j = 0; j < 8; ++j) s[j] = FitScaled(x + 32 * j, 32, levels, 16, -127.0f);
    int field[8];
    QuantizeSignedScales(s, 8, -32, 31, &blk.d, field);
    const float d = F16ToF32(blk.d);
    for (int j = 0; j < 8; ++j) {
      const int ls = field[j] + 32;
      blk.scales_l[j / 2] |= static_cast<uint8_t>((ls & 15) << (4 * (j % 2)));
      blk.scales_h = static_cast<uint16_t>(blk.scales_h | ((ls >> 4) << (2 * j)));
      const float dl = d * static_cast<float>(field[j]);
      for (int i = 0; i < 16; ++i) {
        const int lo = dl != 0 ? NearestLevel(x[32 * j + i] / dl, levels, 16) : 8;
        const int hi = dl != 0 ? NearestLevel(x[32 * j + i + 16] / dl, levels, 16) : 8;
        blk.qs[16 * j + i] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
    std::memcpy(y + b * sizeof(blk), &blk, sizeof(blk));
  }
}

}  // namespace pagellm
