// ApiServer: the HTTP front of `pagellm serve` (cpp-httplib's routing and parsing behind a
// ConnectionGate: connections wait for a whole request head without a thread). It
// listens before the model is loaded so that /health can say 503 while loading, then routes
// the OpenAI-compatible API to the handlers once SetReady() hands it a ServingContext.
//
// Routes: POST /v1/completions, POST /v1/chat/completions, POST /v1/embeddings,
// POST /invocations (SageMaker: routed by the body's shape), GET /v1/models[/{id}],
// POST /tokenize, POST /detokenize, GET /health, GET|POST /ping, GET /load, GET /version,
// GET /metrics, GET /openapi.json, POST /reset_prefix_cache; each also under --root-path.
// With API keys, /v1/*, /invocations and /reset_prefix_cache need "Authorization: Bearer
// <key>" (vLLM protects /v1/*); the rest stay open for probes and scrapers. Every error is a
// JSON body in OpenAI's shape. Around the routes: CORS (cors_policy.h), X-Request-Id with
// --enable-request-id-headers, a uvicorn-style access log line, and TLS when configured.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "server/cors_policy.h"
#include "server/gated_http_server.h"
#include "server/server_config.h"
#include "server/serving_context.h"

namespace pagellm {

class ApiServer {
 public:
  explicit ApiServer(const ServerConfig& config);
  ~ApiServer();  // Stop()
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds host:port (port 0 picks a free one) and serves on background threads.
  Status Start();
  int port() const { return port_; }
  // The model is loaded: the API goes live. `ctx` must outlive Stop().
  void SetReady(ServingContext* ctx);
  // New requests get 503 from now on; requests in flight continue (the caller then shuts the
  // engine down, which aborts them, and their responses end).
  void BeginShutdown();
  // Closes the listening socket and waits for every connection to finish. Idempotent.
  void Stop();
  // Connection counts of the front end (open, serving, rejected, timed out); zeroes with TLS.
  ConnectionGate::Counters connection_counters() const {
    return gated_ != nullptr ? gated_->gate_counters() : ConnectionGate::Counters{};
  }

 private:
  using Clock = std::chrono::steady_clock;
  using Handler = std::function<void(ServingContext&, const httplib::Request&, httplib::Response&,
                                     Clock::time_point arrival)>;
  enum class Access { kOpen, kApiKey };

  void RegisterRoutes();
  // Preflights, CORS headers, X-Request-Id and the access log, around every route.
  void InstallMiddleware();
  // Adds `handler` at `path` for `method` ("GET", "POST": the other method answers 405; or
  // "GET|POST": both).
  void Route(const char* method, const std::string& path, Access access, Handler handler);
  bool Authorized(const httplib::Request& req) const;
  ServingContext* ready() const { return ctx_.load(std::memory_order_acquire); }

  const ServerConfig& config_;
  CorsPolicy cors_;
  // A GatedHttpServer (gated_ points at it); with TLS, httplib's SSLServer, which serves
  // each connection on a thread of its pool (gated_ is null).
  std::unique_ptr<httplib::Server> server_;
  GatedHttpServer* gated_ = nullptr;
  std::thread listen_thread_;
  // Set by the listener thread once listen_after_bind() has returned (see Stop()).
  std::atomic<bool> listener_done_{false};
  std::atomic<ServingContext*> ctx_{nullptr};
  std::atomic<bool> stopping_{false};
  int port_ = 0;
};

}  // namespace pagellm
