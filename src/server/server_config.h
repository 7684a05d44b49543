// Settings of `pagellm serve` beyond the engine's (named as vLLM's server flags).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace pagellm {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;
  // Names clients may send as "model"; the first is reported in responses and metrics.
  std::vector<std::string> served_model_names;
  std::string model_path;  // reported as the model's "root"
  std::string api_key;     // empty: no authentication
  // A Jinja chat template file, or the template text itself; empty: the tokenizer's.
  std::string chat_template;
  std::optional<int> max_log_len;  // characters / token ids of a prompt shown in request logs
  bool disable_log_requests = false;
  bool disable_log_stats = false;
  // Most engine requests admitted but not yet started (no output yet); 0 = no limit. Past it,
  // new requests get 503 at once instead of queueing without bound.
  int max_queued_requests = 0;
  size_t max_body_size = 8u << 20;  // bytes; larger bodies get 413
  int http_threads = 0;             // connections served at once; 0: max-num-seqs + 64
  int max_n = 128;                  // most choices (n x prompts) one request may ask for

  const std::string& model_name() const { return served_model_names.front(); }
};

}  // namespace pagellm
