// Portable MatMul kernels: the fallback for CPUs without AVX2 and the reference the SIMD levels
// are tested against. The quantized kernel emulates the 16 float lanes of the SIMD kernels
// (see matmul_internal.h), so its results are bitwise equal to theirs.
#include <cmath>
#include <cstring>

#include "base/half.h"
#include "kernels/matmul_internal.h"

namespace pagellm::kernels_internal {

void QuantizeActBlock(const float* x, int8_t* q, float* d) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float dd = amax / 127.0f;
  const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
  for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(std::roundf(x[i] * id));
  *d = dd;
}

namespace scalar {
namespace {

// Sum of 16 lanes in the order the SIMD kernels reduce a 512-bit register.
float TreeSum16(const float* a) {
  float b[8], c[4];
  for (int i = 0; i < 8; ++i) b[i] = a[i] + a[i + 8];
  for (int i = 0; i < 4; ++i) c[i] = b[i] + b[i + 4];
  const float d0 = c[0] + c[2];
  const float d1 = c[1] + c[3];
  return d0 + d1;
}

float WeightAt(DType t, const uint8_t* row, int64_t i) {
  switch (t) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, row + 4 * i, 4);
      return v;
    }
    case DType::kF16:
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, row + 2 * i, 2);
      return t == DType::kF16 ? F16ToF32(h) : Bf16ToF32(h);
    }
    default: return 0.0f;
  }
}

// Signed weight value of element e of block `blk` of a quantized row, and the block scale.
int WeightQ(DType t, const uint8_t* row, int64_t blk, int e) {
  if (t == DType::kQ8_0) {
    return reinterpret_cast<const BlockQ8_0*>(row)[blk].qs[e];
  }
  const BlockQ4_0& b = reinterpret_cast<const BlockQ4_0*>(row)[blk];
  const int nib = e < 16 ? (b.qs[e] & 15) : (b.qs[e - 16] >> 4);
  return nib - 8;
}

float WeightScale(DType t, const uint8_t* row, int64_t blk) {
  const int64_t bb = DTypeBlockBytes(t);
  uint16_t h;
  std::memcpy(&h, row + blk * bb, 2);
  return F16ToF32(h);
}

}  // namespace

void PrepareQuantActs(DType wtype, const float* x, int64_t cols, uint8_t* out) {
  const int64_t nb = cols / 32;
  const int32_t c = wtype == DType::kQ4_0 ? 8 : 128;
  for (int64_t p = 0; p < QuantActsPairs(cols); ++p) {
    uint8_t* pair = out + p * kQPairBytes;
    int8_t qs[64] = {};
    float d[2] = {0.0f, 0.0f};
    for (int b = 0; b < 2; ++b) {
      const int64_t blk = 2 * p + b;
      if (blk >= nb) break;
      int8_t q[32];
      QuantizeActBlock(x + blk * 32, q, &d[b]);
      for (int e = 0; e < 32; ++e) qs[QuantActsPos(wtype, b, e)] = q[e];
    }
    float dx[16];
    int32_t bias[16];
    for (int l = 0; l < 16; ++l) {
      // All four bytes of a lane belong to one block; QuantActsPos is monotonic per block.
      const int b = wtype == DType::kQ8_0 ? l / 8 : (l / 4) % 2;
      dx[l] = d[b];
      int32_t s = 0;
      for (int j = 0; j < 4; ++j) s += qs[4 * l + j];
      bias[l] = -c * s;
    }
    std::memcpy(pair, qs, 64);
    std::memcpy(pair + 64, dx, 64);
    std::memcpy(pair + 128, bias, 64);
  }
}

void MatMulFloatBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const WeightMatrix& w = *a.w;
  for (int64_t t = t0; t < t1; ++t) {
    const float* x = a.x + t * w.cols;
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w.row(r);
      float acc = 0.0f;
      for (int64_t i = 0; i < w.cols; ++i) acc += WeightAt(w.dtype, row, i) * x[i];
      a.y[t * w.rows + r] = acc;
    }
  }
}

void MatMulQuantBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const WeightMatrix& w = *a.w;
  const int64_t nb = w.cols / 32;
  const int64_t np = QuantActsPairs(w.cols);
  const int64_t act_bytes = QuantActsBytes(w.cols);
  for (int64_t t = t0; t < t1; ++t) {
    const uint8_t* act = a.qx + t * act_bytes;
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w.row(r);
      float acc[16] = {};
      for (int64_t p = 0; p < np; ++p) {
        const uint8_t* pair = act + p * kQPairBytes;
        const int8_t* xq = reinterpret_cast<const int8_t*>(pair);
        float dx[16];
        std::memcpy(dx, pair + 64, 64);
        int32_t lane_sum[16] = {};
        float ws[2] = {0.0f, 0.0f};
        for (int b = 0; b < 2; ++b) {
          const int64_t blk = 2 * p + b;
          if (blk >= nb) break;
          ws[b] = WeightScale(w.dtype, row, blk);
          for (int e = 0; e < 32; ++e) {
            const int pos = QuantActsPos(w.dtype, b, e);
            lane_sum[pos / 4] += WeightQ(w.dtype, row, blk, e) * xq[pos];
          }
        }
        for (int l = 0; l < 16; ++l) {
          const int b = w.dtype == DType::kQ8_0 ? l / 8 : (l / 4) % 2;
          const float scale = ws[b] * dx[l];
          acc[l] = std::fma(static_cast<float>(lane_sum[l]), scale, acc[l]);
        }
      }
      a.y[t * w.rows + r] = TreeSum16(acc);
    }
  }
}

}  // namespace scalar
}  // namespace pagellm::kernels_internal
