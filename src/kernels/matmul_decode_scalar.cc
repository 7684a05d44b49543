// Portable kernels of the decoding MatMul family (matmul_decode_internal.h): the reference the
// SIMD levels are tested against, bitwise.
#include <cmath>
#include <cstdlib>
#include <memory>

#include "kernels/matmul_decode_internal.h"
#include "pagellm/check.h"

namespace pagellm::kernels_internal {

uint8_t* DecodeScratch(int64_t bytes) {
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<uint8_t, FreeDeleter> buf;
  thread_local int64_t capacity = 0;
  if (bytes > capacity) {
    const int64_t rounded = (bytes + 63) / 64 * 64;
    buf.reset(static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>(rounded))));
    CHECK(buf != nullptr) << "out of memory for " << rounded << " bytes of decoded weights";
    capacity = rounded;
  }
  return buf.get();
}

void PrepareQ8KActs(int32_t, const float* x, int64_t cols, uint8_t* out) {
  const Q8KActsLayout l = GetQ8KActsLayout(cols);
  std::memset(out + l.d_offset, 0, l.bytes - l.d_offset);
  auto* qs = reinterpret_cast<int8_t*>(out);
  for (int64_t s = 0; s < l.nsb; ++s) {
    const float* xs = x + 256 * s;
    float amax = 0.0f;
    for (int i = 0; i < 256; ++i) amax = std::fmax(amax, std::fabs(xs[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < 256; ++i) qs[256 * s + i] = static_cast<int8_t>(std::roundf(xs[i] * id));
    std::memcpy(out + l.d_offset + 4 * s, &d, 4);
    for (int j = 0; j < 16; ++j) {
      int16_t sum = 0;
      for (int i = 0; i < 16; ++i) sum = static_cast<int16_t>(sum + qs[256 * s + 16 * j + i]);
      std::memcpy(out + l.bsum_offset + 32 * s + 2 * j, &sum, 2);
    }
  }
}

namespace scalar {
namespace {

template <DType kType>
void DecodeRow(const uint8_t* row, int64_t cols, const DecodedRowLayout& l, uint8_t* out) {
  auto* q = reinterpret_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(out + l.d_offset);
  auto* m = reinterpret_cast<float*>(out + l.m_offset);
  constexpr int64_t bb = DTypeBlockBytes(kType);
  if constexpr (DecodeTraits<kType>::kSuper) {
    auto* sc = reinterpret_cast<int16_t*>(out + l.sc_offset);
    auto* mn = reinterpret_cast<int16_t*>(out + l.mn_offset);
    for (int64_t s = 0; s < l.blocks; ++s) {
      DecodeSuperCodes<kType>(row + s * bb, q + 256 * s);
      DecodeSuperScales<kType>(row + s * bb, sc + 16 * s, mn + 16 * s, d + s, m + s);
    }
  } else {
    const int64_t nb = cols / 32;
    for (int64_t b = 0; b < l.blocks; ++b) {
      if (b < nb) {
        DecodeBlock32<kType>(row + b * bb, q + 32 * b, d + b, m + b);
      } else {
        std::memset(q + 32 * b, 0, 32);
        d[b] = m[b] = 0.0f;
      }
    }
  }
}

template <DType kType>
float DotSuper(const uint8_t* dec, const DecodedRowLayout& l, const uint8_t* act,
               const Q8KActsLayout& al) {
  const auto* q = reinterpret_cast<const int8_t*>(dec);
  const auto* sc = reinterpret_cast<const int16_t*>(dec + l.sc_offset);
  const auto* mn = reinterpret_cast<const int16_t*>(dec + l.mn_offset);
  const auto* d = reinterpret_cast<const float*>(dec + l.d_offset);
  const auto* m = reinterpret_cast<const float*>(dec + l.m_offset);
  const auto* qx = reinterpret_cast<const int8_t*>(act);
  float acc = 0.0f;
  for (int64_t s = 0; s < l.blocks; ++s) {
    int32_t s1 = 0, s2 = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t dot = 0;
      for (int i = 0; i < 16; ++i) dot += q[256 * s + 16 * j + i] * qx[256 * s + 16 * j + i];
      s1 += sc[16 * s + j] * dot;
      int16_t bsum;
      std::memcpy(&bsum, act + al.bsum_offset + 32 * s + 2 * j, 2);
      s2 += mn[16 * s + j] * bsum;
    }
    float dx;
    std::memcpy(&dx, act + al.d_offset + 4 * s, 4);
    acc = std::fma(static_cast<float>(s1), d[s] * dx, acc);
    if constexpr (DecodeTraits<kType>::kHasMin) {
      acc = std::fma(static_cast<float>(s2), m[s] * dx, acc);
    }
  }
  return acc;
}

template <DType kType>
float Dot32(const uint8_t* dec, const DecodedRowLayout& l, int64_t nb, const uint8_t* act,
            const QuantActsLayout& al) {
  const auto* q = reinterpret_cast<const int8_t*>(dec);
  const auto* d = reinterpret_cast<const float*>(dec + l.d_offset);
  const auto* m = reinterpret_cast<const float*>(dec + l.m_offset);
  const auto* qx = reinterpret_cast<const int8_t*>(act);
  float acc[8] = {};
  for (int64_t b = 0; b < nb; ++b) {
    int32_t s = 0;
    for (int i = 0; i < 32; ++i) s += q[32 * b + i] * qx[32 * b + i];
    float dx;
    int32_t qsum;
    std::memcpy(&dx, act + al.dx_offset + 4 * b, 4);
    std::memcpy(&qsum, act + al.bias_offset + 4 * b, 4);
    float& a = acc[b % 8];
    a = std::fma(static_cast<float>(s), d[b] * dx, a);
    if constexpr (DecodeTraits<kType>::kHasMin) {
      a = std::fma(static_cast<float>(qsum), m[b] * dx, a);
    }
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

template <DType kType>
void MatMulDecodeBlock(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const WeightMatrix& w = *a.w;
  constexpr bool kSuper = DecodeTraits<kType>::kSuper;
  const DecodedRowLayout l = GetDecodedRowLayout(w.cols, kSuper);
  uint8_t* dec = DecodeScratch(l.bytes);
  for (int64_t r = r0; r < r1; ++r) {
    DecodeRow<kType>(w.row(r), w.cols, l, dec);
    for (int64_t t = t0; t < t1; ++t) {
      float y;
      if constexpr (kSuper) {
        const Q8KActsLayout al = GetQ8KActsLayout(w.cols);
        y = DotSuper<kType>(dec, l, a.qx + t * al.bytes, al);
      } else {
        const QuantActsLayout al = GetQuantActsLayout(w.cols);
        y = Dot32<kType>(dec, l, al.nb, a.qx + t * al.bytes, al);
      }
      a.y[t * w.rows + r] = y;
    }
  }
}

#define PAGELLM_DECODE_KERNEL(T) \
  template void MatMulDecodeBlock<T>(const MatMulArgs&, int64_t, int64_t, int64_t, int64_t);
PAGELLM_FOR_EACH_DECODE_TYPE(PAGELLM_DECODE_KERNEL)
#undef PAGELLM_DECODE_KERNEL

}  // namespace scalar
}  // namespace pagellm::kernels_internal
