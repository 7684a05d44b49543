// Integer weight checkpoints in Hugging Face layout (AutoAWQ "gemm", AutoGPTQ / GPTQModel): their
// rows of the weight-format table (multi-tensor formats, kernels/weight_format.h) and the
// repack of their tensors into layouts the kernels stream.
//
// File layouts (in = input features = the kernels' cols, out = output features = rows, g =
// group size, codes q and zero points z unsigned integers of `bits` bits):
//   AWQ, bits 4:   qweight I32 [in][out / 8], qzeros I32 [in / g][out / 8], scales F16
//                  [in / g][out]. Output column 8j + c of a row is nibble kAwqNibble[c] (bits
//                  4n..4n+3) of word j (AutoAWQ packs the columns in the order 0 2 4 6 1 3 5 7).
//                  W[o][k] = scales[k / g][o] * (q - z).
//   GPTQ, bits 4 or 8 (p = 32 / bits codes per word): qweight I32 [in / p][out]: input k is
//                  field k % p (bits bits*(k % p) upwards) of word row k / p; qzeros I32
//                  [G][out / p]: output o is field o % p of word o / p; scales F16 [G][out];
//                  g_idx I32 [in] (the group of each input; absent: k / g); G = ceil(in / g),
//                  1 for g = -1 (one group per row).
//                  W[o][k] = scales[G_k][o] * (q - (z + zero_offset)), G_k = g_idx[k];
//                  zero_offset is 1 for the "gptq" (v1) checkpoint format, which stores z - 1,
//                  and 0 for "gptq_v2".
//
// Repacked layouts, exact (every W[o][k] dequantizes to s * (q - z) in float32, bit for bit):
//   4 bits -> Q4_Z: one block per 32 inputs, d = s, the zero point z (offset included: [0, 16])
//             and the codes q as stored; Q4_Z128 (one d and z per 128 inputs, the kernels
//             apply them once per 4 blocks) when every 128 stored inputs share a group (group
//             sizes that are multiples of 128, AWQ's and GPTQ's default; PAGELLM_Q4_Z128=0
//             keeps Q4_Z).
//   8 bits -> Q8_0: d = s, code = q - z, when every q - z of the matrix lies in [-128, 127]
//             (symmetric checkpoints: z = 128); otherwise F32 values s * (q - z).
//   GPTQ act-order (g_idx other than k / g): the inputs are sorted by group (stable) and the
//             matrix carries the permutation (WeightMatrix::input_perm, applied to x by MatMul);
//             a block of 32 sorted inputs that spans two groups (group sizes not multiples of
//             32) makes the matrix F32 in the file's input order instead.
// Groups (g) must be multiples of 32 or -1 (GPTQ) with in % 32 == 0; out % (32 / bits) == 0.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/weight_format.h"

namespace pagellm {

enum class HfQuantMethod : uint8_t { kAwq, kGptq };

// AWQ's nibble of output column 8j + c within word j.
inline constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// The format row of a checkpoint method with its per-model parameters (bits 4 for AWQ, 4 or 8
// for GPTQ; group_size > 0 and a multiple of 32, or -1 for GPTQ; zero_offset 0 or 1). Parts:
// AWQ {qweight, qzeros, scales}; GPTQ {qweight, qzeros, scales, g_idx} (g_idx may be left out:
// bind with three parts). Check the parameters first with CheckHfQuantParams.
WeightFormat MakeHfQuantFormat(HfQuantMethod method, int bits, int64_t group_size, int zero_offset);

// Empty when supported, else why not ("bits 3 is not supported (4 or 8)").
std::string CheckHfQuantParams(HfQuantMethod method, int bits, int64_t group_size);

}  // namespace pagellm
