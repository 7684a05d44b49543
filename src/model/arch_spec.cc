#include "model/arch_spec.h"

#include "model/decoder_graph.h"
#include "model/gemma_family.h"
#include "model/gemma_graph.h"
#include "model/llama_family.h"
#include "model/moe_family.h"
#include "pagellm/check.h"

namespace pagellm {
namespace {

// Every supported architecture. Defaults of hf_default_max_positions are those of the
// transformers config classes.
const ArchSpec kArchSpecs[] = {
    {
        .arch = Architecture::kLlama,
        .hf_name = "LlamaForCausalLM",
        .hf_description = "LlamaForCausalLM (Llama 1/2/3, SmolLM)",
        .gguf_name = "llama",
        .hf_default_max_positions = 2048,
        .qkv_bias = false,
        .qk_norm = false,
        .moe = false,
        .gguf_moe_norm_topk = false,
        .shared_expert = false,
        .gguf_rope_interleaved = true,
        .activation = FfnActivation::kSilu,
        .parse_hf_fields = ParseLlamaHfFields,
        .parse_gguf_fields = nullptr,
        .hf_tensors = &kLlamaHfTensors,
        .gguf_tensors = &kLlamaGgufTensors,
        .bind_weights = BindLlamaFamilyWeights,
        .count_parameters = CountLlamaFamilyParameters,
        .activation_floats = DecoderActivationFloats,
        .forward = ForwardDecoder,
    },
    {
        .arch = Architecture::kMistral,
        .hf_name = "MistralForCausalLM",
        .hf_description = "MistralForCausalLM",
        .gguf_name = nullptr,
        .hf_default_max_positions = 4096 * 32,
        .qkv_bias = false,
        .qk_norm = false,
        .moe = false,
        .gguf_moe_norm_topk = false,
        .shared_expert = false,
        .gguf_rope_interleaved = true,
        .activation = FfnActivation::kSilu,
        .parse_hf_fields = ParseMistralHfFields,
        .parse_gguf_fields = nullptr,
        .hf_tensors = &kLlamaHfTensors,
        .gguf_tensors = &kLlamaGgufTensors,
        .bind_weights = BindLlamaFamilyWeights,
        .count_parameters = CountLlamaFamilyParameters,
        .activation_floats = DecoderActivationFloats,
        .forward = ForwardDecoder,
    },
    {
        .arch = Architecture::kQwen2,
        .hf_name = "Qwen2ForCausalLM",
        .hf_description = "Qwen2ForCausalLM",
        .gguf_name = "qwen2",
        .hf_default_max_positions = 32768,
        .qkv_bias = true,
        .qk_norm = false,
        .moe = false,
        .gguf_moe_norm_topk = false,
        .shared_expert = false,
        .gguf_rope_interleaved = false,
        .activation = FfnActivation::kSilu,
        .parse_hf_fields = ParseQwen2HfFields,
        .parse_gguf_fields = nullptr,
        .hf_tensors = &kLlamaHfTensors,
        .gguf_tensors = &kLlamaGgufTensors,
        .bind_weights = BindLlamaFamilyWeights,
        .count_parameters = CountLlamaFamilyParameters,
        .activation_floats = DecoderActivationFloats,
        .forward = ForwardDecoder,
    },
    {
        .arch = Architecture::kQwen3,
        .hf_name = "Qwen3ForCausalLM",
        .hf_description = "Qwen3ForCausalLM",
        .gguf_name = "qwen3",
        .hf_default_max_positions = 32768,
        .qkv_bias = false,
        .qk_norm = true,
        .moe = false,
        .gguf_moe_norm_topk = false,
        .shared_expert = false,
        .gguf_rope_interleaved = false,
        .activation = FfnActivation::kSilu,
        .parse_hf_fields = ParseQwen3HfFields,
        .parse_gguf_fields = nullptr,
        .hf_tensors = &kLlamaHfTensors,
        .gguf_tensors = &kLlamaGgufTensors,
        .bind_weights = BindLlamaFamilyWeights,
        .count_parameters = CountLlamaFamilyParameters,
        .activation_floats = DecoderActivationFloats,
        .forward = ForwardDecoder,
    },
    {
        .arch = Architecture::kMixtral,
        .hf_name = "MixtralForCausalLM",
        .hf_description = "MixtralForCausalLM",
        .gguf_name = "llama",
        .hf_default_max_positions = 4096 * 32,
        .qkv_bias = false,
        .qk_norm = false,
        .moe = true,
        .gguf_moe_norm_topk = true,
        .shared_expert = false,
        .gguf_rope_interleaved = true,
        .activation = FfnActivation::kSilu,
        .parse_hf_fields = ParseMixtralHfFields,
        .parse_gguf_fields = nullptr,
        .hf_tensors = &kMixtralHfTensors,
        .gguf_tensors = &kMoeGgufTensors,
        .bind_weights = BindLlamaFamilyWeights,
        .count_parameters = CountLlamaFamilyParameters,
        .activation_floats = DecoderActivationFloats,
        .forward = ForwardDecoder,
    },
    {
        .arch = Architecture::kQwen2Moe,
        .hf_name = "Qwen2MoeForCausalLM",
        .hf_description = "Qwen2MoeForCausalLM",
        .gguf_name = "qwen2moe",
        .hf_default_max_positions = 32768,
        .qkv_bias = true,
        .qk_norm = false,
        .moe = true,
        .gguf_moe_norm_topk = false,
        .shared_expert = true,
        .gguf_rope_interleaved = false,
        .activation = FfnActivation::kSilu,
        .parse_hf_fields = ParseQwen2MoeHfFields,
        .parse_gguf_fields = nullptr,
        .hf_tensors = &kQwenMoeHfTensors,
        .gguf_tensors = &kMoeGgufTensors,
        .bind_weights = BindLlamaFamilyWeights,
        .count_parameters = CountLlamaFamilyParameters,
        .activation_floats = DecoderActivationFloats,
        .forward = ForwardDecoder,
    },
    {
        .arch = Architecture::kQwen3Moe,
        .hf_name = "Qwen3MoeForCausalLM",
        .hf_description = "Qwen3MoeForCausalLM",
        .gguf_name = "qwen3moe",
        .hf_default_max_positions = 32768,
        .qkv_bias = false,
        .qk_norm = true,
        .moe = true,
        .gguf_moe_norm_topk = true,
        .shared_expert = false,
        .gguf_rope_interleaved = false,
        .activation = FfnActivation::kSilu,
        .parse_hf_fields = ParseQwen3MoeHfFields,
        .parse_gguf_fields = nullptr,
        .hf_tensors = &kQwenMoeHfTensors,
        .gguf_tensors = &kMoeGgufTensors,
        .bind_weights = BindLlamaFamilyWeights,
        .count_parameters = CountLlamaFamilyParameters,
        .activation_floats = DecoderActivationFloats,
        .forward = ForwardDecoder,
    },
    {
        .arch = Architecture::kGemma2,
        .hf_name = "Gemma2ForCausalLM",
        .hf_description = "Gemma2ForCausalLM",
        .gguf_name = "gemma2",
        .hf_default_max_positions = 8192,
        .qkv_bias = false,
        .qk_norm = false,
        .moe = false,
        .gguf_moe_norm_topk = false,
        .shared_expert = false,
        .gguf_rope_interleaved = false,
        .activation = FfnActivation::kGeluTanh,
        .parse_hf_fields = ParseGemma2HfFields,
        .parse_gguf_fields = ParseGemma2GgufFields,
        .hf_tensors = &kGemmaHfTensors,
        .gguf_tensors = &kGemmaGgufTensors,
        .bind_weights = BindGemmaWeights,
        .count_parameters = CountGemmaParameters,
        .activation_floats = GemmaActivationFloats,
        .forward = ForwardGemma,
    },
    {
        .arch = Architecture::kGemma3,
        .hf_name = "Gemma3ForCausalLM",
        .hf_description = "Gemma3ForCausalLM",
        .gguf_name = "gemma3",
        .hf_default_max_positions = 131072,
        .qkv_bias = false,
        .qk_norm = true,
        .moe = false,
        .gguf_moe_norm_topk = false,
        .shared_expert = false,
        .gguf_rope_interleaved = false,
        .activation = FfnActivation::kGeluTanh,
        .parse_hf_fields = ParseGemma3HfFields,
        .parse_gguf_fields = ParseGemma3GgufFields,
        .hf_tensors = &kGemmaHfTensors,
        .gguf_tensors = &kGemmaGgufTensors,
        .bind_weights = BindGemmaWeights,
        .count_parameters = CountGemmaParameters,
        .activation_floats = GemmaActivationFloats,
        .forward = ForwardGemma,
    },
};

}  // namespace

const ArchSpec& GetArchSpec(Architecture arch) {
  for (const ArchSpec& s : kArchSpecs)
    if (s.arch == arch) return s;
  CHECK(false) << "no ArchSpec for architecture " << static_cast<int>(arch);
  return kArchSpecs[0];
}

const ArchSpec* FindArchByHfName(std::string_view hf_name) {
  for (const ArchSpec& s : kArchSpecs)
    if (hf_name == s.hf_name) return &s;
  return nullptr;
}

const ArchSpec* FindArchByGgufName(std::string_view gguf_name, bool has_experts) {
  const ArchSpec* any = nullptr;
  for (const ArchSpec& s : kArchSpecs) {
    if (s.gguf_name == nullptr || gguf_name != s.gguf_name) continue;
    if (s.moe == has_experts) return &s;
    if (any == nullptr) any = &s;
  }
  return any;
}

std::string SupportedArchitecturesList() {
  std::string out;
  for (const ArchSpec& s : kArchSpecs)
    out += (out.empty() ? "" : ", ") + std::string(s.hf_description);
  return out;
}

std::string SupportedGgufArchitecturesList() {
  std::string out;
  for (const ArchSpec& s : kArchSpecs) {
    // Each name once: the first spec that has it (Mixtral shares "llama").
    if (s.gguf_name == nullptr || FindArchByGgufName(s.gguf_name, false) != &s) continue;
    out += (out.empty() ? "" : ", ") + std::string(s.gguf_name);
  }
  return out;
}

}  // namespace pagellm
