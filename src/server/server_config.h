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
  // --api-key (several allowed; any one authenticates); empty: no authentication.
  std::vector<std::string> api_keys;
  // A Jinja chat template file, or the template text itself; empty: the tokenizer's.
  std::string chat_template;
  std::optional<int> max_log_len;    // characters / token ids of a prompt shown in request logs
  bool enable_log_requests = false;  // vLLM's "Received request ..." line per request
  bool enable_log_outputs = false;   // and one line per finished output
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

  // CORS (Starlette's CORSMiddleware semantics, as vLLM's server): "*" allows every value.
  std::vector<std::string> allowed_origins = {"*"};
  std::vector<std::string> allowed_methods = {"*"};
  std::vector<std::string> allowed_headers = {"*"};
  bool allow_credentials = false;

  // TLS: with both files the server speaks HTTPS only.
  std::string ssl_keyfile;
  std::string ssl_certfile;
  std::string ssl_ca_certs;  // CA bundle for client certificates
  int ssl_cert_reqs = 0;     // Python's ssl.CERT_NONE (0), CERT_OPTIONAL (1), CERT_REQUIRED (2)
  std::string ssl_ciphers;   // OpenSSL cipher list (TLS <= 1.2)

  // Behind a path-routing proxy: every route also answers under this prefix ("/api").
  std::string root_path;
  bool enable_request_id_headers = false;  // X-Request-Id on every response
  // One uvicorn-style access line per request, unless off or below the log level.
  bool access_log = true;
  std::vector<std::string> access_log_excluded_paths;
  bool disable_openapi = false;  // --disable-fastapi-docs: no /openapi.json

  // Chat: how message content reaches the template ("string": parts joined into one string,
  // "openai": the list of parts; "auto" looks at the template), whether a request's own
  // chat_template is used, the kwargs every render gets (a JSON object, request kwargs win),
  // and the role of replies to a generation prompt.
  std::string chat_template_content_format = "auto";
  bool trust_request_chat_template = false;
  std::string default_chat_template_kwargs;
  std::string response_role = "assistant";
  bool return_tokens_as_token_ids = false;  // the default of the request field
  bool enable_force_include_usage = false;  // every stream ends with a usage chunk
  // Tool calling and reasoning (vLLM's flags): tool_choice "auto" parses the model's calls
  // with --tool-call-parser (outparse/tool_call_parser.h); --reasoning-parser splits
  // <think>...</think> into reasoning_content (outparse/reasoning_parser.h). Empty: none.
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;
  std::string reasoning_parser;

  // Sampling defaults: "auto" (the model's generation_config.json over vLLM's), "vllm"
  // (vLLM's alone) or a directory holding a generation_config.json; then the JSON object of
  // --override-generation-config on top.
  std::string generation_config = "auto";
  std::string override_generation_config;

  const std::string& model_name() const { return served_model_names.front(); }
};

}  // namespace pagellm
