// EmbeddingRunner: vLLM's pooling runner (--runner pooling, --convert embed, --task embed) over
// a generative model: a prompt's final-normed hidden states (the input of the LM head) pooled
// into one vector. It runs the model in its own session (one sequence's KV cache), one prompt
// at a time, beside the generation engine.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/model_session.h"
#include "pagellm/status.h"

namespace pagellm {

enum class PoolingType { kLast, kMean, kCls };

struct PoolerConfig {
  PoolingType pooling = PoolingType::kLast;  // vLLM's default for a converted decoder
  bool normalize = true;                     // L2-normalize the pooled vector
};

// Parses --pooler-config / --override-pooler-config JSON ({"pooling_type": "LAST" | "MEAN" |
// "CLS", "normalize": bool}) over `base`.
StatusOr<PoolerConfig> ParsePoolerConfig(const std::string& json, PoolerConfig base);

class EmbeddingRunner {
 public:
  static StatusOr<std::unique_ptr<EmbeddingRunner>> Create(const SessionOptions& options,
                                                           PoolerConfig pooler);

  // The embedding of `ids` (1 <= size <= max_model_len): pooled as configured, normalized
  // unless `normalize` says otherwise. Thread-safe (prompts run one at a time).
  StatusOr<std::vector<float>> Embed(const std::vector<int32_t>& ids,
                                     std::optional<bool> normalize);
  int max_model_len() const { return session_->max_model_len(); }
  int hidden_size() const { return session_->config().hidden_size; }

 private:
  EmbeddingRunner() = default;
  std::unique_ptr<ModelSession> session_;
  PoolerConfig pooler_;
  std::mutex mu_;
};

}  // namespace pagellm
