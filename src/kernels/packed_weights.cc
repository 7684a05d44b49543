#include "kernels/packed_weights.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "base/cpu_features.h"
#include "base/huge_page_buffer.h"
#include "kernels/weight_format.h"
#include "pagellm/check.h"

namespace pagellm {
namespace {

// fn(begin, end) over [0, n): split across pool's threads, or in one call without a pool.
template <typename Fn>
void ForRanges(ThreadPool* pool, int64_t n, int64_t grain, Fn&& fn) {
  if (pool != nullptr) {
    pool->ParallelFor(n, grain, fn);
  } else {
    fn(int64_t{0}, n);
  }
}

}  // namespace

bool MatMulUsesPackedWeights(DType dtype) {
  const WeightFormat& f = GetWeightFormat(dtype);
  if (f.packed == PackedLayout::kNone) return false;
  // PAGELLM_PACKED_WEIGHTS=0 keeps the original layout (A/B benchmarks of the packing).
  static const bool disabled = [] {
    const char* e = std::getenv("PAGELLM_PACKED_WEIGHTS");
    return e != nullptr && std::string(e) == "0";
  }();
  if (disabled) return false;
  if (ActiveSimdLevel() != SimdLevel::kAvx512) return false;
  // The integer kernels that read it need VNNI; without it the AVX2 ones run on the rows.
  const bool integer = f.matmul == MatMulFamily::kInt8Dot || f.matmul == MatMulFamily::kInt8Decode;
  return !integer || GetCpuFeatures().avx512_vnni;
}

void PackF16Lanes(const WeightMatrix& w, uint8_t* out, ThreadPool* pool) {
  CHECK(GetWeightFormat(w.dtype).packed == PackedLayout::kF16Lanes) << DTypeName(w.dtype);
  const F16LaneLayout l = GetF16LaneLayout(w.rows, w.cols);
  auto pack_groups = [&](int64_t g0, int64_t g1) {
    for (int64_t gi = g0; gi < g1; ++gi) {
      auto* g = reinterpret_cast<uint16_t*>(out + gi * l.group_bytes);
      std::memset(g, 0, static_cast<size_t>(l.group_bytes));
      for (int lane = 0; lane < 16 && gi * 16 + lane < w.rows; ++lane) {
        const uint8_t* row = w.row(gi * 16 + lane);
        for (int64_t k = 0; k < w.cols; ++k) std::memcpy(g + 16 * k + lane, row + 2 * k, 2);
      }
    }
  };
  ForRanges(pool, l.groups, 16, pack_groups);
}

void PackQuantWeights(const WeightMatrix& w, uint8_t* out, ThreadPool* pool) {
  const WeightFormat& f = GetWeightFormat(w.dtype);
  CHECK(f.packed == PackedLayout::kQuantPairs) << f.name;
  CHECK_EQ(w.cols % f.block_elems, 0);
  const QuantPackedLayout l = GetQuantPackedLayout(w.dtype, w.rows, w.cols);
  const int64_t bb = f.block_bytes;
  const int dwords = static_cast<int>((bb - 2) / 4);  // code dwords after the fp16 scale
  // Signed int8 codes (c = 128) become the unsigned u = w + 128 the kernels multiply; 4-bit
  // codes (c = 8) already are unsigned.
  const uint32_t flip = f.act_code_offset == 128 ? 0x80808080u : 0u;
  auto pack_groups = [&](int64_t g0, int64_t g1) {
    for (int64_t gi = g0; gi < g1; ++gi) {
      uint8_t* g = out + gi * l.group_bytes;
      std::memset(g, 0, static_cast<size_t>(l.group_bytes));
      for (int lane = 0; lane < 16 && gi * 16 + lane < w.rows; ++lane) {
        const uint8_t* row = w.row(gi * 16 + lane);
        for (int64_t b = 0; b < l.nb; ++b) {
          const uint8_t* blk = row + b * bb;
          std::memcpy(g + l.ScaleOffset(b) + 2 * lane, blk, 2);  // fp16 d
          uint8_t* codes = g + l.CodeOffset(b) + 4 * lane;
          for (int j = 0; j < dwords; ++j) {
            uint32_t v;
            std::memcpy(&v, blk + 2 + 4 * j, 4);
            v ^= flip;
            std::memcpy(codes + 64 * j, &v, 4);
          }
        }
      }
    }
  };
  ForRanges(pool, l.groups, 16, pack_groups);
}

namespace {

template <bool kShared>
void PackQ4ZQuadGroup(const WeightMatrix& w, int64_t r0, uint8_t* out) {
  using Block = std::conditional_t<kShared, BlockQ4_Z128, BlockQ4_Z>;
  constexpr int kSub = kShared ? 4 : 1;  // blocks of 32 per stored block
  const Q4ZQuadLayout<kShared> l = GetQ4ZQuadLayout<kShared>(w.rows, w.cols);
  std::memset(out, 0, static_cast<size_t>(l.group_bytes));
  for (int lane = 0; lane < 16 && r0 + lane < w.rows; ++lane) {
    const uint8_t* row = w.row(r0 + lane);
    for (int64_t sb = 0; sb < l.nb / kSub; ++sb) {
      Block blk;
      std::memcpy(&blk, row + sb * sizeof(Block), sizeof(blk));
      const uint16_t d = blk.d;
      const int64_t b0 = kSub * sb;  // its first block of 32
      std::memcpy(out + l.ScaleOffset(b0) + 2 * lane, &d, 2);
      out[l.ZeroOffset(b0) + lane] = blk.z;
      for (int i = 0; i < kSub; ++i) {
        uint8_t* codes = out + l.CodeOffset(b0 + i) + 4 * lane;
        for (int j = 0; j < 4; ++j) std::memcpy(codes + 64 * j, blk.qs + 16 * i + 4 * j, 4);
      }
    }
  }
}

}  // namespace

void PackQ4ZGroup(const WeightMatrix& w, int64_t r0, uint8_t* out) {
  CHECK(w.dtype == DType::kQ4_Z || w.dtype == DType::kQ4_Z128) << DTypeName(w.dtype);
  if (w.dtype == DType::kQ4_Z128) {
    PackQ4ZQuadGroup<true>(w, r0, out);
  } else {
    PackQ4ZQuadGroup<false>(w, r0, out);
  }
}

void PackQ4ZWeights(const WeightMatrix& w, uint8_t* out, ThreadPool* pool) {
  const bool shared = w.dtype == DType::kQ4_Z128;
  const int64_t groups = (w.rows + 15) / 16;
  const int64_t group_bytes = shared ? GetQ4ZQuadLayout<true>(w.rows, w.cols).group_bytes
                                     : GetQ4ZQuadLayout<false>(w.rows, w.cols).group_bytes;
  ForRanges(pool, groups, 16, [&](int64_t g0, int64_t g1) {
    for (int64_t gi = g0; gi < g1; ++gi) PackQ4ZGroup(w, 16 * gi, out + gi * group_bytes);
  });
}

void PackedWeights::AddAll(const std::vector<const WeightMatrix*>& ws, ThreadPool* pool) {
  // The arena's layout: each matrix to copy at a 64-byte offset (the kernels' aligned loads).
  // Its map_ entry is made here (a repeat, such as a tied embedding, finds it and is skipped)
  // and becomes the copy below.
  struct Slot {
    WeightMatrix* copy;
    bool packs;
    int64_t offset, bytes;
  };
  std::vector<Slot> slots;
  int64_t total = 0;
  for (const WeightMatrix* w : ws) {
    if (w->data == nullptr || w->rows == 0) continue;
    const bool packs = MatMulUsesPackedWeights(w->dtype);
    if (!packs && !HugePagesEnabled()) continue;
    auto [it, added] = map_.emplace(w->data, *w);
    if (!added) continue;
    // The packed copy, or a plain copy of the rows moved onto huge pages.
    const int64_t bytes =
        packs ? GetWeightFormat(w->dtype).packed_bytes(w->rows, w->cols) : w->nbytes();
    slots.push_back({&it->second, packs, total, bytes});
    total += (bytes + 63) / 64 * 64;
  }
  if (slots.empty()) return;
  HugePageBuffer buf(static_cast<size_t>(total));
  CHECK(buf.data() != nullptr) << "out of memory copying " << total << " bytes of weights";
  for (const Slot& s : slots) {
    WeightMatrix& c = *s.copy;  // still the original
    uint8_t* dst = buf.data() + s.offset;
    if (s.packs) {
      GetWeightFormat(c.dtype).pack(c, dst, pool);
    } else {
      const int64_t row_bytes = c.row_bytes();
      ForRanges(pool, c.rows, 64, [&](int64_t r0, int64_t r1) {
        std::memcpy(dst + r0 * row_bytes, c.row(r0), static_cast<size_t>((r1 - r0) * row_bytes));
      });
    }
    // The kernels never read the original again; the loader's file pages can go (resident
    // memory stays at one copy of the weights; a tied embedding refaults the rows it looks up).
    ReleasePages(c.data, static_cast<size_t>(c.nbytes()));
    (s.packs ? c.packed : c.data) = dst;
    bytes_ += s.bytes;
  }
  buffers_.push_back(std::move(buf));
}

}  // namespace pagellm
