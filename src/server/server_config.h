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
  // Requests served at once (one thread each, streams included); 0: max-num-seqs + 64.
  // Connections waiting for a request cost no thread (ConnectionGate).
  int http_threads = 0;
  int max_connections = 16384;         // open connections in all; past it 503 (0: fd limit)
  int max_connections_per_client = 0;  // from one address; 0: no limit
  double header_timeout_s = 10;        // whole request head must arrive within this
  double keep_alive_timeout_s = 5;     // idle time between requests on one connection
  int max_n = 128;                     // most choices (n x prompts) one request may ask for

  const std::string& model_name() const { return served_model_names.front(); }
};

}  // namespace pagellm
