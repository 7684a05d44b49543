// Why a request finished, as the engine reports it (EngineOutput::finish_reason); the OpenAI /
// vLLM spelling ("stop", "length", "abort") is produced only where outputs leave the engine
// (server JSON, LLM results, metrics labels, the CLI).
#pragma once

#include <cstdint>

namespace pagellm {

enum class FinishReason : uint8_t {
  kStop,    // EOS, a stop token or a stop string
  kLength,  // max_tokens or max_model_len reached
  kAbort,   // aborted by the client, or never admitted (EngineOutput::error says why)
};

// "stop", "length", "abort".
const char* FinishReasonName(FinishReason reason);

}  // namespace pagellm
