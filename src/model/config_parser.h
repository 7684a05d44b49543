// Builds a ModelConfig from a Hugging Face config.json or from GGUF metadata, and reads the
// request defaults of generation_config.json. Every parser validates the result
// (ModelConfig::Validate) and names its source and the offending key in errors.
#pragma once

#include <string>

#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "pagellm/status.h"

namespace pagellm {

// `config_json_text` is the content of config.json; `source_name` (usually its path) prefixes
// every error. Unknown architecture -> InvalidArgument listing the supported ones; features we
// cannot run (yarn RoPE, MLP bias, non-SiLU activation...) -> Unimplemented.
StatusOr<ModelConfig> ParseHfConfig(const std::string& config_json_text,
                                    const std::string& source_name);

// From `general.architecture` ("llama" or "qwen2") and the `{arch}.*` keys. Also inspects the
// tensor list: no `output.weight` means tied embeddings; a `rope_freqs.weight` tensor is
// recognised as Llama 3 RoPE scaling.
StatusOr<ModelConfig> ParseGgufConfig(const GgufFile& gguf);

// Applies generation_config.json: sampling defaults into `defaults`, and bos/eos ids (when
// present) override those of `config`.
Status ParseGenerationConfig(const std::string& json_text, const std::string& source_name,
                             ModelConfig* config, LoadedModel::GenerationDefaults* defaults);

}  // namespace pagellm
