// ServingContext: what every OpenAI handler needs once the model is loaded: the engine, the
// tokenizer, the chat template, the metrics, the server settings, and the shared admission
// state. Immutable after construction except for the atomic counters.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "engine/async_engine.h"
#include "metrics/engine_metrics.h"
#include "nlohmann/json.hpp"
#include "outparse/reasoning_parser.h"
#include "outparse/tool_call_parser.h"
#include "pagellm/sampling_params.h"
#include "server/api_error.h"
#include "server/embedding_runner.h"
#include "server/generation_defaults.h"
#include "server/server_config.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

class ServingContext {
 public:
  using Clock = std::chrono::steady_clock;

  // `chat_template` is the parsed --chat-template or tokenizer template (nullopt: none);
  // `defaults` the resolved --generation-config / --override-generation-config.
  // InvalidArgument when --default-chat-template-kwargs is not a JSON object, or the tool-call /
  // reasoning parser settings are invalid (as vLLM refuses them at start-up).
  static StatusOr<std::unique_ptr<ServingContext>> Create(const ServerConfig& config,
                                                          AsyncEngine* engine,
                                                          EngineMetrics* metrics,
                                                          std::optional<ChatTemplate> chat_template,
                                                          GenerationDefaults defaults);

  const ServerConfig& config() const { return config_; }
  AsyncEngine& engine() const { return *engine_; }
  EngineMetrics& metrics() const { return *metrics_; }
  const Tokenizer& tokenizer() const { return engine_->core().tokenizer(); }
  int32_t max_model_len() const { return engine_->core().max_model_len(); }
  int32_t vocab_size() const;
  const std::string& model_name() const { return config_.model_name(); }
  // The sampling defaults of --generation-config (completions: max_tokens 16).
  const SamplingParams& default_params() const { return defaults_.params; }
  // generation config's max_new_tokens: a cap on every request's output tokens.
  std::optional<int> max_new_tokens() const { return defaults_.max_new_tokens; }

  // --tool-call-parser (null without --enable-auto-tool-choice) and --reasoning-parser.
  const ToolCallParser* tool_parser() const { return tool_parser_.get(); }
  const std::optional<ReasoningParser>& reasoning_parser() const { return reasoning_parser_; }
  // With a reasoning parser: where a structured-output constraint starts for this prompt. The
  // output starts inside the reasoning (deepseek_r1) unless the prompt already closed it (its
  // last think marker is </think>, e.g. enable_thinking=false); qwen3's may open with <think>.
  // None without a reasoning parser or without <think> / </think> tokens.
  std::optional<ReasoningBoundary> ReasoningBoundaryFor(const std::vector<int32_t>& prompt) const;

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
  // The id of an API request, as vLLM forms it: "<prefix>-<base>" where base is the
  // X-Request-Id header, else the body's request_id, else a fresh one. `engine_id` gets the
  // id for the engine, unique even when clients reuse theirs.
  std::string RequestId(const char* prefix, const std::string& header, const nlohmann::json& body,
                        std::string* engine_id);

  // The pooling runner (--runner pooling): /v1/embeddings is served and generation is not,
  // as vLLM serves a pooling model. Null for a generating server.
  EmbeddingRunner* embedder() const { return embedder_; }
  void set_embedder(EmbeddingRunner* embedder) { embedder_ = embedder; }

  // API requests (generation and embedding) in flight, for GET /load.
  int server_load() const { return server_load_.load(std::memory_order_relaxed); }
  void AddLoad(int delta) { server_load_.fetch_add(delta, std::memory_order_relaxed); }

  // Admission against --max-queued-requests: reserves `n` not-yet-started slots (false when
  // that would exceed the limit). Each slot is released by the request's first output.
  bool TryReserveQueued(int n);
  void ReleaseQueued(int n) { num_queued_.fetch_sub(n, std::memory_order_relaxed); }

  // Set once the server begins shutting down: requests aborted from then on report 503.
  void set_stopping() { stopping_.store(true); }
  bool stopping() const { return stopping_.load(); }

  // Request logging (vLLM's "Received request ..." line), with --enable-log-requests and
  // honouring --max-log-len.
  void LogRequest(const std::string& id, const std::string& prompt,
                  const std::vector<int32_t>& prompt_ids, const SamplingParams& params) const;

 private:
  const ServerConfig& config_;
  AsyncEngine* engine_;
  EngineMetrics* metrics_;
  ServingContext(const ServerConfig& config, AsyncEngine* engine, EngineMetrics* metrics,
                 std::optional<ChatTemplate> chat_template, GenerationDefaults defaults);

  std::optional<ChatTemplate> chat_template_;
  GenerationDefaults defaults_;
  std::unique_ptr<ToolCallParser> tool_parser_;
  std::optional<ReasoningParser> reasoning_parser_;
  int32_t think_start_token_ = -1;
  int32_t think_end_token_ = -1;
  nlohmann::ordered_json default_template_kwargs_ = nlohmann::ordered_json::object();
  std::atomic<int> server_load_{0};
  EmbeddingRunner* embedder_ = nullptr;
  std::atomic<int> num_queued_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> id_counter_{0};
  uint64_t id_salt_;
};

// A short SamplingParams description for logs.
std::string DescribeParams(const SamplingParams& p);

}  // namespace pagellm
