// libFuzzer target: Hugging Face config.json, generation_config.json and the quantization
// configs of AWQ / GPTQ checkpoints (quantization_config in config.json, quantize_config.json).
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/config_parser.h"
#include "model/quantization_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagellm;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = ParseHfConfig(text, "fuzz/config.json");
  // generation_config.json is applied on top of a parsed config; use a valid default when the
  // input is not itself a valid config.
  ModelConfig base;
  if (config.ok()) {
    base = *config;
  } else {
    base.hidden_size = 64;
    base.intermediate_size = 128;
    base.num_layers = 1;
    base.num_heads = 8;
    base.num_kv_heads = 4;
    base.head_dim = 8;
    base.vocab_size = 512;
    base.max_position_embeddings = 512;
  }
  LoadedModel::GenerationDefaults defaults;
  Status s = ParseGenerationConfig(text, "fuzz/generation_config.json", &base, &defaults);
  auto nested = ParseQuantizationConfig(text, "fuzz/config.json", /*nested=*/true);
  auto plain = ParseQuantizationConfig(text, "fuzz/quantize_config.json", /*nested=*/false);
  if (nested.ok() && nested->enabled) {
    (void)nested->Format();  // the supported parameters make a format row
    (void)CheckQuantizationOption("gptq_marlin", *nested, "fuzz");
  }
  volatile bool sink = s.ok() && plain.ok();
  (void)sink;
  return 0;
}
