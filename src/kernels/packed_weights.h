// Weights re-laid out once, at load time, for the AVX-512 VNNI Q8_0 / Q4_0 / Q4_Z(128) kernels and
// the AVX-512 F16 kernels.
//
// The row-major GGUF layout keeps each row's blocks together, but the kernels compute 16 rows
// at a time, one int32 lane per row, which needs every 32-block of a 16-row group transposed
// into dword lanes. Doing that transpose on every call costs more shuffles than the dot
// products themselves at decode. The packed copy stores it already transposed, so a decode
// step streams each group linearly with plain 64-byte loads.
//
// Layout (QuantPackedLayout): groups of 16 rows, group g at packed + g * group_bytes, made of
// ceil(nb / 2) pairs of blocks, each pair
//   codes  [2][code_bytes]: Q8_0: 8 x 64 bytes u[j], lane r = the unsigned codes
//          (w xor 0x80) of elements 4j..4j+3 of row 16g + r;  Q4_0: 4 x 64 bytes q[k], lane r
//          = the raw nibble bytes 4k..4k+3 of row 16g + r (low nibbles: elements 4k..4k+3,
//          high nibbles: 16+4k..19+4k).
//   scales [2][16] fp16: row 16g + r's block scale d.
// so a task reads one linear stream of whole cache lines (scales next to their codes, not in a
// second region), which the hardware prefetcher follows. Rows past the matrix end and the
// second block of a last, odd pair are zero. The packed copy has the size of the original up
// to the padding of the last group and pair.
//
// Q4_Z (Q4ZPackedLayout): the same transpose, with a zero point per row and block. Groups of 16
// rows, group g at packed + g * group_bytes, made of ceil(nb / 4) quads of blocks, each quad 1216
// bytes (19 whole cache lines, so every load stays aligned):
//   codes  [4][256]: block i's 4 x 64 bytes q[k], as Q4_0's above
//   scales [4][16] fp16: row 16g + r's block scale d
//   zeros  [4][16] uint8: row 16g + r's block zero point z
// Rows past the matrix end and blocks past nb are zero.
//
// Q4_Z128 (Q4Z128PackedLayout): the same quads with one scale and zero point per row and quad
// (its groups of 128 inputs are the quads), 1088 bytes (17 cache lines):
//   codes  [4][256], as Q4_Z's
//   scales [16] fp16, zeros [16] uint8, 16 bytes of zero padding
// 0.53 bytes per weight, against Q4_Z's 0.59 and Q4_0's 0.5625.
//
// F16 (F16LaneLayout): the float kernels sum k = j (mod 16) in lane j of a register per row
// (matmul_avx512.cc); with 16 rows in the lanes instead, each residue's chain runs for 16 rows
// at once and the tree over residues becomes vertical adds (no horizontal sums, one linear
// stream per task). Groups of 16 rows, group g at packed + g * group_bytes; in a group, the 16
// rows' weights at k are 16 fp16 (32 bytes) at byte offset 32 * k, i.e. a 512 k chunk is a
// 16 KiB region [step s][residue j][row]. k >= cols and rows past the matrix end are zero.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/huge_page_buffer.h"
#include "base/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace pagellm {

struct QuantPackedLayout {
  int64_t nb = 0;           // blocks of 32 per row
  int64_t code_bytes = 0;   // per block of a group: 512 (Q8_0) or 256 (Q4_0)
  int64_t pair_bytes = 0;   // a pair of blocks: 2 x codes, then 2 x 16 fp16 scales (64 bytes)
  int64_t group_bytes = 0;  // ceil(nb / 2) pairs
  int64_t groups = 0;
  // Byte offsets of block blk's codes and of its 16 scales from the group's start.
  int64_t CodeOffset(int64_t blk) const { return (blk >> 1) * pair_bytes + (blk & 1) * code_bytes; }
  int64_t ScaleOffset(int64_t blk) const {
    return (blk >> 1) * pair_bytes + 2 * code_bytes + (blk & 1) * 32;
  }
};

// Bytes per block of a group's codes (16 rows x a block's codes, the block less its fp16
// scale: 512 for Q8_0, 256 for Q4_0), and per pair of blocks (codes, then scales).
constexpr int64_t QuantPackedCodeBytes(DType dtype) {
  return 16 * (DTypeBlockBytes(dtype) - 2);
}
constexpr int64_t QuantPackedPairBytes(DType dtype) {
  return 2 * QuantPackedCodeBytes(dtype) + 64;
}

inline QuantPackedLayout GetQuantPackedLayout(DType dtype, int64_t rows, int64_t cols) {
  QuantPackedLayout l;
  l.nb = cols / 32;
  l.code_bytes = QuantPackedCodeBytes(dtype);
  l.pair_bytes = QuantPackedPairBytes(dtype);
  l.group_bytes = (l.nb + 1) / 2 * l.pair_bytes;
  l.groups = (rows + 15) / 16;
  return l;
}

// Q4_Z and Q4_Z128 quads: kShared (Q4_Z128) stores one scale and zero point per row and quad
// (the 4 blocks share them) instead of one per row and block.
template <bool kShared>
struct Q4ZQuadLayout {
  static constexpr int64_t kCodeBytes = 256;  // one block of a group: 16 rows x 16 bytes
  static constexpr int64_t kScalesAt = 1024;  // scales' offset in a quad, after 4 x codes
  // Q4_Z: 4 x 16 fp16 scales, 4 x 16 zeros (19 lines); Q4_Z128: 16 fp16 scales, 16 zeros and
  // 16 bytes of padding (17 lines).
  static constexpr int64_t kZerosAt = kScalesAt + (kShared ? 32 : 128);
  static constexpr int64_t kQuadBytes = kShared ? 1088 : 1216;
  int64_t nb = 0;           // blocks of 32 per row
  int64_t group_bytes = 0;  // ceil(nb / 4) quads
  int64_t groups = 0;
  static int64_t CodeOffset(int64_t blk) {
    return (blk >> 2) * kQuadBytes + (blk & 3) * kCodeBytes;
  }
  static int64_t ScaleOffset(int64_t blk) {
    return (blk >> 2) * kQuadBytes + kScalesAt + (kShared ? 0 : (blk & 3) * 32);
  }
  static int64_t ZeroOffset(int64_t blk) {
    return (blk >> 2) * kQuadBytes + kZerosAt + (kShared ? 0 : (blk & 3) * 16);
  }
};
using Q4ZPackedLayout = Q4ZQuadLayout<false>;
using Q4Z128PackedLayout = Q4ZQuadLayout<true>;

template <bool kShared>
inline Q4ZQuadLayout<kShared> GetQ4ZQuadLayout(int64_t rows, int64_t cols) {
  Q4ZQuadLayout<kShared> l;
  l.nb = cols / 32;
  l.group_bytes = (l.nb + 3) / 4 * Q4ZQuadLayout<kShared>::kQuadBytes;
  l.groups = (rows + 15) / 16;
  return l;
}
inline Q4ZPackedLayout GetQ4ZPackedLayout(int64_t rows, int64_t cols) {
  return GetQ4ZQuadLayout<false>(rows, cols);
}

// Bytes of one 16-k step of an F16 lane group: 16 residues x 16 rows' fp16 weights.
constexpr int64_t kF16LaneStepBytes = 16 * 16 * 2;

struct F16LaneLayout {
  int64_t steps = 0;        // 16-k steps per row: ceil(cols / 16)
  int64_t group_bytes = 0;  // kF16LaneStepBytes * steps
  int64_t groups = 0;
};

inline F16LaneLayout GetF16LaneLayout(int64_t rows, int64_t cols) {
  F16LaneLayout l;
  l.steps = (cols + 15) / 16;
  l.group_bytes = kF16LaneStepBytes * l.steps;
  l.groups = (rows + 15) / 16;
  return l;
}

// Writes the lane layout of F16 matrix w (groups * group_bytes bytes) to out.
void PackF16Lanes(const WeightMatrix& w, uint8_t* out, ThreadPool* pool = nullptr);

// True if the active SIMD level's kernels read a packed copy of weights of this type (its
// weight format's packed layout, kernels/weight_format.h).
bool MatMulUsesPackedWeights(DType dtype);

// Writes w's packed copy (GetQuantPackedLayout(...).groups * group_bytes bytes) to out; pool
// (may be null) packs groups in parallel.
void PackQuantWeights(const WeightMatrix& w, uint8_t* out, ThreadPool* pool = nullptr);

// Q4_Z / Q4_Z128: writes w's packed copy (GetQ4ZQuadLayout<w.dtype == kQ4_Z128>(...).groups *
// group_bytes bytes) to out; pool (may be null) packs groups in parallel.
void PackQ4ZWeights(const WeightMatrix& w, uint8_t* out, ThreadPool* pool = nullptr);
// Q4_Z / Q4_Z128 rows [r0, min(r0 + 16, w.rows)) of w as one packed group (group_bytes at
// out), for the kernels run on a matrix without a packed copy.
void PackQ4ZGroup(const WeightMatrix& w, int64_t r0, uint8_t* out);

// Owns load-time copies of a model's matrices, all on huge pages (base/huge_page_buffer.h).
// AddAll() the matrices once (at load); then Get(w) returns w with `packed` set (a packed copy),
// or with `data` pointing to a plain copy on huge pages, or w itself when it has no copy.
//
// The copies of one AddAll() share one arena, laid out in the order given (the order a decode
// step reads them) at 64-byte offsets: one buffer per matrix would leave every matrix under
// 2 MiB (Qwen2.5-1.5B's q / k / v / o, 3.2 MB a layer) and the partial last page of the others
// on 4 KiB pages, about a fifth of a Q4_K_M decode step's bytes, and rounding each matrix up
// to whole huge pages instead would cost up to 2 MiB per matrix (an MoE model's 0.84 MiB
// experts would take 2.3x their size). In one arena only its last page is partial.
class PackedWeights {
 public:
  // Packs each matrix if the active kernels use a packed layout for its type; otherwise,
  // unless PAGELLM_HUGE_PAGES=0, copies its rows unchanged onto huge pages (the file mapping
  // has 4 KiB pages). Empty matrices, matrices added before and repeats (tied embeddings)
  // are skipped. pool (may be null) works in parallel.
  void AddAll(const std::vector<const WeightMatrix*>& ws, ThreadPool* pool = nullptr);
  // One matrix in an arena of its own.
  void Add(const WeightMatrix& w, ThreadPool* pool = nullptr) { AddAll({&w}, pool); }
  const WeightMatrix& Get(const WeightMatrix& w) const {
    if (map_.empty()) return w;
    auto it = map_.find(w.data);
    return it != map_.end() ? it->second : w;
  }
  int64_t bytes() const { return bytes_; }

 private:
  std::unordered_map<const uint8_t*, WeightMatrix> map_;
  std::vector<HugePageBuffer> buffers_;
  int64_t bytes_ = 0;
};

}  // namespace pagellm
