// Portable MatMul kernels: the fallback for CPUs without AVX2 and the reference the SIMD levels
// are tested against. The quantized kernel follows the per-block scheme of matmul_internal.h,
// so its results are bitwise equal to the SIMD levels'.
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

template <DType kType>
float WeightAt(const uint8_t* row, int64_t i) {
  if constexpr (kType == DType::kF32) {
    float v;
    std::memcpy(&v, row + 4 * i, 4);
    return v;
  } else {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    return kType == DType::kF16 ? F16ToF32(h) : Bf16ToF32(h);
  }
}

// Exact dot product of block `blk` of a quantized row with 32 activation values, and the
// weight block's scale.
template <DType kType>
int32_t BlockDot(const uint8_t* row, int64_t blk, const int8_t* q, float* dw) {
  int32_t s = 0;
  if constexpr (kType == DType::kQ8_0) {
    BlockQ8_0 b;
    std::memcpy(&b, row + blk * sizeof(BlockQ8_0), sizeof(b));
    for (int e = 0; e < 32; ++e) s += b.qs[e] * q[e];
    *dw = F16ToF32(b.d);
  } else if constexpr (kType == DType::kQ4_Z) {
    BlockQ4_Z b;
    std::memcpy(&b, row + blk * sizeof(BlockQ4_Z), sizeof(b));
    for (int e = 0; e < 16; ++e) {
      s += ((b.qs[e] & 15) - b.z) * q[e];
      s += ((b.qs[e] >> 4) - b.z) * q[e + 16];
    }
    *dw = F16ToF32(b.d);
  } else {
    BlockQ4_0 b;
    std::memcpy(&b, row + blk * sizeof(BlockQ4_0), sizeof(b));
    for (int e = 0; e < 16; ++e) {
      s += ((b.qs[e] & 15) - 8) * q[e];
      s += ((b.qs[e] >> 4) - 8) * q[e + 16];
    }
    *dw = F16ToF32(b.d);
  }
  return s;
}

}  // namespace

void PrepareQuantActs(int32_t c, const float* x, int64_t cols, uint8_t* out) {
  const QuantActsLayout l = GetQuantActsLayout(cols);
  std::memset(out, 0, l.bytes);
  int8_t* qs = reinterpret_cast<int8_t*>(out);
  for (int64_t b = 0; b < l.nb; ++b) {
    float d;
    QuantizeActBlock(x + 32 * b, qs + 32 * b, &d);
    int32_t sum = 0;
    for (int e = 0; e < 32; ++e) sum += qs[32 * b + e];
    const int32_t bias = -c * sum;
    std::memcpy(out + l.dx_offset + 4 * b, &d, 4);
    std::memcpy(out + l.bias_offset + 4 * b, &bias, 4);
  }
}

template <DType kType>
void MatMulFloatBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const WeightMatrix& w = *a.w;
  for (int64_t t = t0; t < t1; ++t) {
    const float* x = a.x + t * w.cols;
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w.row(r);
      float acc = 0.0f;
      for (int64_t i = 0; i < w.cols; ++i) acc += WeightAt<kType>(row, i) * x[i];
      a.y[t * w.rows + r] = acc;
    }
  }
}

template void MatMulFloatBlock<DType::kF32>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
template void MatMulFloatBlock<DType::kF16>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
template void MatMulFloatBlock<DType::kBF16>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);

namespace {

// Q4_Z128: per group of 128 (4 activation blocks b) the blocks' exact integer sums
//   isum_b = sum (u - z) * q
// are scaled by their activations' d_x,b and summed in fp32, then the group's weight scale
// multiplies once:
//   f = float(isum_0) * d_x,0;  f = fma(float(isum_b), d_x,b, f) for b = 1..3
//   acc = fma(f, d_w, acc)
float DotQ4Z128(const uint8_t* row, const uint8_t* act, const QuantActsLayout& l) {
  const int8_t* q = reinterpret_cast<const int8_t*>(act);
  float acc = 0.0f;
  for (int64_t g = 0; g < l.nb / 4; ++g) {
    BlockQ4_Z128 b;
    std::memcpy(&b, row + g * sizeof(BlockQ4_Z128), sizeof(b));
    float f = 0.0f;
    for (int j = 0; j < 4; ++j) {
      const int64_t blk = 4 * g + j;
      const int8_t* qb = q + 32 * blk;
      int32_t isum = 0;
      for (int e = 0; e < 16; ++e) {
        isum += ((b.qs[16 * j + e] & 15) - b.z) * qb[e];
        isum += ((b.qs[16 * j + e] >> 4) - b.z) * qb[e + 16];
      }
      float dx;
      std::memcpy(&dx, act + l.dx_offset + 4 * blk, 4);
      f = j == 0 ? static_cast<float>(isum) * dx : std::fma(static_cast<float>(isum), dx, f);
    }
    acc = std::fma(f, F16ToF32(b.d), acc);
  }
  return acc;
}

}  // namespace

template <DType kType>
void MatMulQuantBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const WeightMatrix& w = *a.w;
  const QuantActsLayout l = GetQuantActsLayout(w.cols);
  for (int64_t t = t0; t < t1; ++t) {
    const uint8_t* act = a.qx + t * l.bytes;
    const int8_t* q = reinterpret_cast<const int8_t*>(act);
    for (int64_t r = r0; r < r1; ++r) {
      float acc = 0.0f;
      if constexpr (kType == DType::kQ4_Z128) {
        acc = DotQ4Z128(w.row(r), act, l);
      } else {
        for (int64_t b = 0; b < l.nb; ++b) {
          float dw, dx;
          const int32_t isum = BlockDot<kType>(w.row(r), b, q + 32 * b, &dw);
          std::memcpy(&dx, act + l.dx_offset + 4 * b, 4);
          acc = std::fma(static_cast<float>(isum), dw * dx, acc);
        }
      }
      a.y[t * w.rows + r] = acc;
    }
  }
}

template void MatMulQuantBlock<DType::kQ8_0>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
template void MatMulQuantBlock<DType::kQ4_0>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
template void MatMulQuantBlock<DType::kQ4_Z>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
template void MatMulQuantBlock<DType::kQ4_Z128>(const MatMulArgs&, int64_t, int64_t, int64_t,
                                                int64_t);

}  // namespace scalar
}  // namespace pagellm::kernels_internal
