#include "kernels/kquant_packed.h"

#include <cstring>

#include "kernels/matmul_decode_internal.h"
#include "pagellm/check.h"

namespace pagellm {
namespace {

// The unsigned code of a reference code q (matmul_decode_internal.h DecodeSuperCodes).
template <DType kType>
inline int UnsignedCode(int8_t q) {
  if constexpr (kType == DType::kQ6_K) {
    return q + 32;
  } else if constexpr (kType == DType::kIQ4_XS) {
    for (int i = 0; i < 16; ++i) {
      if (kIq4NlValues[i] == q) return i;
    }
    CHECK(false) << "not an IQ4 table value: " << static_cast<int>(q);
    return 0;
  } else {
    return q;
  }
}

// One row's super-block s (the file's bytes at blk) into lane `lane` of the group's packed
// super-block at sb.
template <DType kType>
void PackSuperBlockLane(const uint8_t* blk, const KQuantPackedLayout& l, int lane, uint8_t* sb) {
  int8_t q[256];
  int16_t sc[16], mn[16];
  float d, m;  // unused: the fp16 fields are copied below
  kernels_internal::DecodeSuperCodes<kType>(blk, q);
  kernels_internal::DecodeSuperScales<kType>(blk, sc, mn, &d, &m);
  int u[256];
  for (int e = 0; e < 256; ++e) u[e] = UnsignedCode<kType>(q[e]);
  for (int j = 0; j < 8; ++j) {
    for (int k = 0; k < 4; ++k) {
      for (int b = 0; b < 4; ++b) {
        const int lo = u[32 * j + 4 * k + b], hi = u[32 * j + 16 + 4 * k + b];
        const int64_t at = l.nib_offset + 64 * (4 * j + k) + 4 * lane + b;
        if constexpr (kType == DType::kQ6_K) {
          sb[at] = static_cast<uint8_t>(lo | ((hi >> 4) << 6));
          sb[l.extra_offset + 64 * (2 * j + k / 2) + 4 * lane + b] |=
              static_cast<uint8_t>((hi & 15) << (4 * (k % 2)));
          continue;
        }
        sb[at] = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
        if constexpr (kType == DType::kQ5_K) {
          sb[l.extra_offset + 64 * j + 4 * lane + b] |=
              static_cast<uint8_t>((((lo >> 4) & 1) << k) | (((hi >> 4) & 1) << (4 + k)));
        }
      }
    }
  }
  // Sub-block scales and mins: Q6_K per 16 elements; the others per 32 (sc[2j] == sc[2j + 1]).
  const int step = kType == DType::kQ6_K ? 1 : 2;
  for (int p = 0; p < l.sc_pairs; ++p) {
    for (int h = 0; h < 2; ++h) {
      const int j = step * (2 * p + h);
      sb[l.sc_offset + 32 * p + 2 * lane + h] = static_cast<uint8_t>(static_cast<int8_t>(sc[j]));
      if (l.mn_offset != 0) {
        sb[l.mn_offset + 32 * p + 2 * lane + h] = static_cast<uint8_t>(static_cast<int8_t>(mn[j]));
      }
    }
  }
  // d (and dmin, negated: m = -dmin) as the file's fp16 bits.
  const int d_at = kType == DType::kQ6_K ? 208 : 0;
  uint16_t dh;
  std::memcpy(&dh, blk + d_at, 2);
  std::memcpy(sb + l.d_offset + 2 * lane, &dh, 2);
  if (l.m_offset != 0) {
    uint16_t mh;
    std::memcpy(&mh, blk + 2, 2);
    mh ^= 0x8000;
    std::memcpy(sb + l.m_offset + 2 * lane, &mh, 2);
  }
}

template <DType kType>
void PackGroups(const WeightMatrix& w, const KQuantPackedLayout& l, uint8_t* out, int64_t g0,
                int64_t g1) {
  constexpr int64_t bb = DTypeBlockBytes(kType);
  for (int64_t g = g0; g < g1; ++g) {
    uint8_t* group = out + g * l.group_bytes;
    std::memset(group, 0, static_cast<size_t>(l.group_bytes));
    for (int lane = 0; lane < 16 && 16 * g + lane < w.rows; ++lane) {
      const uint8_t* row = w.row(16 * g + lane);
      for (int64_t s = 0; s < l.nsb; ++s) {
        PackSuperBlockLane<kType>(row + s * bb, l, lane, group + s * l.sb_bytes);
      }
    }
  }
}

}  // namespace

int64_t KQuantPackedBytes(DType t, int64_t rows, int64_t cols) {
  const KQuantPackedLayout l = GetKQuantPackedLayout(t, rows, cols);
  return l.groups * l.group_bytes;
}

void PackKQuantWeights(const WeightMatrix& w, uint8_t* out, ThreadPool* pool) {
  CHECK(HasKQuantPackedLayout(w.dtype)) << DTypeName(w.dtype);
  CHECK_EQ(w.cols % 256, 0);
  const KQuantPackedLayout l = GetKQuantPackedLayout(w.dtype, w.rows, w.cols);
  auto pack = [&](int64_t g0, int64_t g1) {
    switch (w.dtype) {
      case DType::kQ4_K:
        return PackGroups<DType::kQ4_K>(w, l, out, g0, g1);
      case DType::kQ5_K:
        return PackGroups<DType::kQ5_K>(w, l, out, g0, g1);
      case DType::kQ6_K:
        return PackGroups<DType::kQ6_K>(w, l, out, g0, g1);
      default:
        return PackGroups<DType::kIQ4_XS>(w, l, out, g0, g1);
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(l.groups, 4, pack);
  } else {
    pack(0, l.groups);
  }
}

}  // namespace pagellm
