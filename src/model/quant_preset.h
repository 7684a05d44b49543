// llama.cpp's quantization presets (`llama-quantize`'s type names: Q4_K_M, Q5_K_S, IQ4_XS, ...)
// and the per-tensor type each gives, so that a file `pagellm quantize` writes has the tensor
// types of the file llama-quantize writes from the same source (checked against
// ../shared/models/kquant-ref in tests/kquant_ref_test.cc):
//   - output.weight (or token_embd.weight when the model ties it to the output) is Q6_K (Q8_0
//     stays Q8_0), other 2-D weights the preset's base type, 1-D tensors and the MoE router
//     (ffn_gate_inp) stay as they are;
//   - attn_v, attn_output and ffn_down get more bits in the presets that say so (Q2_K, Q3_K_*,
//     Q4_K_*, Q5_K_M), some only in the layers where "more bits" helps most (the first and last
//     eighth and every third layer between, llama.cpp's use_more_bits);
//   - a K-quant tensor whose rows are not a multiple of 256 falls back to a 32-block type
//     (Q2_K/Q3_K/IQ4_XS -> IQ4_NL, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pagellm/dtype.h"
#include "pagellm/status.h"

namespace pagellm {

struct QuantPreset {
  std::string name;        // as llama-quantize spells it
  DType base;              // the type of most weights
  uint32_t file_type = 0;  // GGUF general.file_type (llama.h's llama_ftype)
};

// Every preset, in llama-quantize's order.
const std::vector<QuantPreset>& QuantPresets();
// Case-insensitive; InvalidArgument listing the names otherwise.
StatusOr<QuantPreset> FindQuantPreset(std::string_view name);

struct QuantTensorInfo {
  std::string_view name;       // GGUF tensor name, e.g. blk.3.attn_v.weight
  std::vector<int64_t> shape;  // outer first
  int num_layers = 0;          // the model's block count
  int gqa = 1;                 // query heads per KV head
  bool has_output = true;      // false: token_embd is also the output projection
};

// The type the preset gives this tensor; `source` is its type in the input (kept for tensors
// that are not quantized).
DType PresetTensorType(const QuantPreset& preset, const QuantTensorInfo& t, DType source);

}  // namespace pagellm
