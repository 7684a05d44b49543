// ServingContext: what every OpenAI handler needs once the model is loaded: the engine, the
// tokenizer, the chat template, the metrics, the server settings, and the shared admission
// state. Immutable after construction except for the atomic counters.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "engine/async_engine.h"
#include "metrics/engine_metrics.h"
#include "nlohmann/json.hpp"
#include "pagellm/sampling_params.h"
#include "server/api_error.h"
#include "server/server_config.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

class ServingContext {
 public:
  using Clock = std::chrono::steady_clock;

  // `chat_template` is the parsed --chat-template or tokenizer template (nullopt: none).
  ServingContext(const ServerConfig& config, AsyncEngine* engine, EngineMetrics* metrics,
                 std::optional<ChatTemplate> chat_template);

  const ServerConfig& config() const { return config_; }
  AsyncEngine& engine() const { return *engine_; }
  EngineMetrics& metrics() const { return *metrics_; }
  const Tokenizer& tokenizer() const { return engine_->core().tokenizer(); }
  int32_t max_model_len() const { return engine_->core().max_model_len(); }
  int32_t vocab_size() const;
  const std::string& model_name() const { return config_.model_name(); }
  // The model's generation_config defaults over vLLM's (completions: max_tokens 16).
  const SamplingParams& default_params() const { return default_params_; }

  // nullopt when the body names no model or one of the served names; else 404 (vLLM's
  // "The model `x` does not exist.").
  std::optional<ApiError> CheckModel(const nlohmann::json& body) const;

  // Text -> ids as vLLM's server does: special-token text in the prompt becomes those tokens;
  // BOS/EOS added per the tokenizer config when add_special. An empty completion prompt is
  // BOS alone (as `pagellm generate`).
  //
  // `max_tokens` bounds the work and memory a huge text may cost (tokenizing takes about 50
  // bytes of transient memory per input byte): a text longer than kBytesPerTokenProbe x
  // (max_tokens + kTokenMargin) bytes has a prefix tokenized first (kFirstProbeBytes, then one
  // sized by the density measured on it, at most that bound), and when the prefix alone is
  // more than max_tokens + kTokenMargin tokens the text is refused (InvalidArgument, "more
  // than N tokens") without tokenizing the rest. A text whose prefixes are shorter (e.g. long
  // runs that make single tokens) is tokenized in full and judged by its exact count.
  // The margin covers the tokens that change where the prefix is cut (a merge across the cut
  // affects at most the last few tokens of the prefix).
  StatusOr<std::vector<int32_t>> Tokenize(const std::string& text, bool add_special,
                                          std::optional<int64_t> max_tokens,
                                          std::string_view limit_name = "") const;
  static constexpr int64_t kBytesPerTokenProbe = 8;
  static constexpr int64_t kTokenMargin = 64;
  static constexpr size_t kFirstProbeBytes = 16384;
  // One token's text for logprobs (its bytes decoded, special tokens spelled out).
  std::string TokenText(int32_t id) const;

  // Renders a chat request's messages with the chat template. `body` holds messages and the
  // template options (add_generation_prompt, continue_final_message, tools, documents,
  // chat_template_kwargs). Errors (no template, template raised, bad messages) are 400s.
  StatusOr<std::string> RenderChat(const nlohmann::ordered_json& body) const;

  // "cmpl-<32 hex>" style ids, unique per process.
  std::string NewRequestId(const char* prefix);

  // Admission against --max-queued-requests: reserves `n` not-yet-started slots (false when
  // that would exceed the limit). Each slot is released by the request's first output.
  bool TryReserveQueued(int n);
  void ReleaseQueued(int n) { num_queued_.fetch_sub(n, std::memory_order_relaxed); }

  // Set once the server begins shutting down: requests aborted from then on report 503.
  void set_stopping() { stopping_.store(true); }
  bool stopping() const { return stopping_.load(); }

  // Request logging (vLLM's "Received request ..." line), honouring --max-log-len and
  // --disable-log-requests.
  void LogRequest(const std::string& id, const std::string& prompt,
                  const std::vector<int32_t>& prompt_ids, const SamplingParams& params) const;

 private:
  const ServerConfig& config_;
  AsyncEngine* engine_;
  EngineMetrics* metrics_;
  std::optional<ChatTemplate> chat_template_;
  SamplingParams default_params_;
  std::atomic<int> num_queued_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> id_counter_{0};
  uint64_t id_salt_;
};

// A short SamplingParams description for logs.
std::string DescribeParams(const SamplingParams& p);

}  // namespace pagellm
