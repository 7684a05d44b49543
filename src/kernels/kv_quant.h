// Element formats of the paged KV cache and their scalar (reference) encoders and decoders.
//
// One "row" is the K (or V) vector of one token for one KV head: head_dim elements plus, for the
// integer formats, their quantisation metadata stored right after the values:
//   float32   head_dim x 4 B
//   bfloat16  head_dim x 2 B            (round to nearest even)
//   float16   head_dim x 2 B            (IEEE half, saturated to +-65504, never inf)
//   fp8_e4m3  head_dim x 1 B            x / layer_scale, OCP e4m3fn, saturated to +-448
//   fp8_e5m2  head_dim x 1 B            unscaled, saturated to +-57344 (never inf)
//   int8      head_dim x 1 B + 4 B      asymmetric: x ~ q x scale + zero, q in [0, 255],
//                                       scale and zero fp16 (LMDeploy's per-token, per-head scheme)
//   int4      head_dim / 2 B + 4 B      same with q in [0, 15]; byte i holds element i (low
//                                       nibble) and element i + head_dim/2 (high nibble)
// int4 rows are stored in a rotated basis: K and V rows are multiplied by the orthonormal
// Hadamard matrix H (head_dim a power of two) before quantisation. The rotation spreads the
// outlier channels of K over all channels, so the per-row range (and the 4-bit step) shrinks;
// attention rotates q the same way (q.k = Hq.Hk) and un-rotates its output (H is its own
// inverse), so nothing outside the kernel sees the rotated basis.
// Decoding never makes inf; it makes NaN only for the byte patterns PoisonWithNaN writes
// (0xFF..: NaN in every format, including e4m3's 0x7F/0xFF), so tests can prove that kernels
// never read unused slots.
#pragma once

#include <cstdint>

#include "base/kv_cache_dtype.h"

namespace pagellm {

inline constexpr float kFp8E4m3Max = 448.0f;
inline constexpr float kFp8E5m2Max = 57344.0f;
inline constexpr int kKvIntMetaBytes = 4;  // fp16 scale + fp16 zero point

// fp8 -> canonical e4m3; float/int formats unchanged. CHECK-fails on kAuto (resolve it first).
KvCacheDtype CanonicalKvStorageDtype(KvCacheDtype dtype);

// Bytes of one row of head_dim elements in `dtype` (values + metadata).
int KvRowBytes(KvCacheDtype dtype, int head_dim);
// Bytes of the values alone (the metadata of int formats follows them).
int KvRowValueBytes(KvCacheDtype dtype, int head_dim);

// fp8 and integer formats (not the float formats): these get K smoothing (the start-up
// calibration of engine/kv_calibration.h).
bool KvDtypeIsQuantized(KvCacheDtype dtype);
// Integer formats: their smoothing also divides K by a per-channel range s (fp8 only
// subtracts the offset c, its relative precision makes s pointless).
bool KvDtypeUsesKRangeSmoothing(KvCacheDtype dtype);

// Whether rows of this format are stored Hadamard-rotated (int4 with a power-of-two head_dim).
bool KvRowsRotated(KvCacheDtype dtype, int head_dim);

// Encodes `x` (head_dim floats) into `dst` (KvRowBytes bytes). `layer_scale` divides values
// before fp8_e4m3 encoding (ignored by other formats). Non-finite inputs are saturated (NaN
// -> 0), so a written row always decodes to finite values. Rotation is the caller's job.
void QuantizeKvRow(KvCacheDtype dtype, const float* x, int head_dim, float layer_scale,
                   uint8_t* dst);
// Decodes one row (reference implementation; the attention kernels have their own fused SIMD
// decoders and are tested against this).
void DequantizeKvRow(KvCacheDtype dtype, const uint8_t* src, int head_dim, float layer_scale,
                     float* out);

uint8_t FloatToFp8E4m3(float x);  // round to nearest even, saturating, NaN -> 0
uint8_t FloatToFp8E5m2(float x);
float Fp8E4m3ToFloat(uint8_t b);  // 0x7F/0xFF (e4m3fn NaN) -> NaN
float Fp8E5m2ToFloat(uint8_t b);

// In-place orthonormal Walsh-Hadamard transform of n floats (n a power of two): self-inverse.
void HadamardRotate(float* x, int n);

// Largest |x| over n floats (for --calculate-kv-scales), ignoring NaN.
float MaxAbs(const float* x, int64_t n);

}  // namespace pagellm
