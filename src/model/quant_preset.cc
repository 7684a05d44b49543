#include "model/quant_preset.h"

#include <cctype>
#include <cstdlib>

#include "fmt/format.h"

namespace pagellm {

const std::vector<QuantPreset>& QuantPresets() {
  static const std::vector<QuantPreset> presets = {
      {"Q4_0", DType::kQ4_0, 2},      {"Q4_1", DType::kQ4_1, 3},    {"Q5_0", DType::kQ5_0, 8},
      {"Q5_1", DType::kQ5_1, 9},      {"Q8_0", DType::kQ8_0, 7},    {"Q2_K", DType::kQ2_K, 10},
      {"Q3_K_S", DType::kQ3_K, 11},   {"Q3_K_M", DType::kQ3_K, 12}, {"Q3_K_L", DType::kQ3_K, 13},
      {"Q4_K_S", DType::kQ4_K, 14},   {"Q4_K_M", DType::kQ4_K, 15}, {"Q5_K_S", DType::kQ5_K, 16},
      {"Q5_K_M", DType::kQ5_K, 17},   {"Q6_K", DType::kQ6_K, 18},   {"IQ4_NL", DType::kIQ4_NL, 25},
      {"IQ4_XS", DType::kIQ4_XS, 30}, {"F16", DType::kF16, 1},      {"BF16", DType::kBF16, 32},
      {"F32", DType::kF32, 0}};
  return presets;
}

StatusOr<QuantPreset> FindQuantPreset(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string names;
  for (const QuantPreset& p : QuantPresets()) {
    if (p.name == upper) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  return InvalidArgumentError(
      fmt::format("unknown quantization type '{}' (one of: {})", name, names));
}

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Layer index of a blk.N.* name, -1 otherwise.
int LayerOf(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  return std::atoi(std::string(name.substr(4)).c_str());
}

// llama.cpp's use_more_bits: the first and last eighth of the layers, and every third between.
bool MoreBits(int layer, int layers) {
  return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

bool IsSuperBlock(DType t) {
  return DTypeBlockElems(t) == 256;
}

DType Fallback(DType t) {
  switch (t) {
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kIQ4_XS:
      return DType::kIQ4_NL;
    case DType::kQ4_K:
      return DType::kQ5_0;
    case DType::kQ5_K:
      return DType::kQ5_1;
    default:
      return DType::kQ8_0;
  }
}

}  // namespace

DType PresetTensorType(const QuantPreset& preset, const QuantTensorInfo& t, DType source) {
  const std::string_view n = t.name;
  const bool quantizable = t.shape.size() >= 2 && EndsWith(n, ".weight") &&
                           n.find("_norm") == std::string_view::npos &&
                           n.find("ffn_gate_inp") == std::string_view::npos;
  if (!quantizable) return source;
  const std::string& p = preset.name;
  const DType base = preset.base;
  const int layer = LayerOf(n);
  const int layers = std::max(1, t.num_layers);
  DType type = base;
  const bool is_output = n == "output.weight" || (!t.has_output && n == "token_embd.weight");
  if (is_output) {
    if (base != DType::kQ8_0 && base != DType::kF16 && base != DType::kBF16 && base != DType::kF32)
      type = DType::kQ6_K;
  } else if (n.find("attn_v.weight") != std::string_view::npos) {
    if (p == "Q2_K") type = t.gqa >= 4 ? DType::kQ4_K : DType::kQ3_K;
    if (p == "Q3_K_M") type = layer < 2 ? DType::kQ5_K : DType::kQ4_K;
    if (p == "Q3_K_L") type = DType::kQ5_K;
    if (p == "Q4_K_S" && layer < 4) type = DType::kQ5_K;
    if ((p == "Q4_K_M" || p == "Q5_K_M") && MoreBits(layer, layers)) type = DType::kQ6_K;
  } else if (n.find("attn_output.weight") != std::string_view::npos) {
    if (p == "Q2_K") type = DType::kQ3_K;
    if (p == "Q3_K_M") type = DType::kQ4_K;
    if (p == "Q3_K_L") type = DType::kQ5_K;
  } else if (n.find("ffn_down") != std::string_view::npos) {
    if (p == "Q2_K") type = DType::kQ3_K;
    if (p == "Q3_K_M") type = layer < layers / 16 ? DType::kQ5_K : DType::kQ4_K;
    if (p == "Q3_K_L") type = DType::kQ5_K;
    if (p == "Q4_K_S" && layer < layers / 8) type = DType::kQ5_K;
    if ((p == "Q4_K_M" || p == "Q5_K_M") && MoreBits(layer, layers)) type = DType::kQ6_K;
  }
  if (IsSuperBlock(type) && t.shape.back() % 256 != 0) type = Fallback(type);
  if (t.shape.back() % DTypeBlockElems(type) != 0) return source;
  return type;
}

}  // namespace pagellm
