#include "server/api_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>

#include "base/heap_release.h"
#include "fmt/format.h"
#include "server/http_util.h"
#include "server/openai_handlers.h"
#include "server/openapi_spec.h"
#include "server/tls_setup.h"
#include "spdlog/spdlog.h"

namespace pagellm {
namespace {

// Compares without an early exit, so response timing does not reveal how much of a guessed
// key was right.
bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 401:
      return "Unauthorized";
    case 503:
      return "Service Unavailable";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Request Entity Too Large";
    case 414:
      return "URI Too Long";
    case 416:
      return "Range Not Satisfiable";
    default:
      return status >= 500 ? "Internal Server Error" : "Bad Request";
  }
}

constexpr int kListenBacklog = 2048;  // uvicorn's default
constexpr size_t kTrimAfterBodyBytes = 1 << 20;

std::string RandomHex32() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
}

}  // namespace

ApiServer::ApiServer(const ServerConfig& config)
    : config_(config),
      cors_(config.allowed_origins, config.allowed_methods, config.allowed_headers,
            config.allow_credentials) {}

ApiServer::~ApiServer() {
  Stop();
}

Status ApiServer::Start() {
  const bool tls = !config_.ssl_certfile.empty() || !config_.ssl_keyfile.empty();
  ConnectionLimits limits;
  limits.workers = std::max(4, config_.http_threads);
  limits.max_connections = config_.max_connections;
  limits.max_connections_per_client = config_.max_connections_per_client;
  limits.head_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(config_.header_timeout_s * 1000));
  limits.keep_alive_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(config_.keep_alive_timeout_s * 1000));
  if (tls) {
    if (config_.ssl_certfile.empty() || config_.ssl_keyfile.empty())
      return InvalidArgumentError("TLS needs both --ssl-certfile and --ssl-keyfile");
    std::string error;
    auto ssl = std::make_unique<httplib::SSLServer>(
        [this, &error](SSL_CTX& ctx) { return ConfigureTls(ctx, config_, &error); });
    if (!ssl->is_valid()) return InvalidArgumentError(error.empty() ? "cannot set up TLS" : error);
    // The gate reads request heads from the socket, which TLS encrypts: TLS connections are
    // served by httplib's pool, one thread each (docs/SERVER.md, Limitations).
    const int threads = limits.workers;
    ssl->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server_ = std::move(ssl);
  } else {
    if (!config_.ssl_ca_certs.empty())
      return InvalidArgumentError("--ssl-ca-certs needs --ssl-certfile and --ssl-keyfile");
    auto gated = std::make_unique<GatedHttpServer>();
    gated_ = gated.get();
    server_ = std::move(gated);
  }
  server_->set_payload_max_length(config_.max_body_size);
  // Clients (the OpenAI SDKs) keep connections alive across many requests; closing them
  // after httplib's default of 5 requests makes them retry on a dead socket. An idle
  // kept-alive connection waits in the gate, not in a thread.
  server_->set_keep_alive_max_count(100000);
  server_->set_keep_alive_timeout(static_cast<time_t>(config_.keep_alive_timeout_s));
  server_->set_read_timeout(30);
  server_->set_write_timeout(30);
  RegisterRoutes();
  InstallMiddleware();
  server_->set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request&, httplib::Response& res) {
        // Handlers write their own error bodies; this fills the ones httplib made (no route,
        // body over --max-body-size, unparsable request line).
        if (!res.body.empty() || res.content_length_ > 0)
          return httplib::Server::HandlerResponse::Unhandled;
        ApiError e = res.status == 404 ? ApiError::NotFound("Not Found")
                     : res.status == 413
                         ? ApiError::PayloadTooLarge(config_.max_body_size)
                         : ApiError{res.status, "BadRequestError", ReasonPhrase(res.status), ""};
        e.status = res.status;
        SendError(res, e);
        return httplib::Server::HandlerResponse::Handled;
      }));
  server_->set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        spdlog::error("{} {}: {}", req.method, req.path, what);
        SendError(res, ApiError::Internal(what));
      });
  // httplib listens with a backlog of 5 (compiled into Debian's libcpp-httplib). A burst of
  // clients connecting at once (a benchmark at concurrency 32) overflows it; the kernel then
  // drops handshakes and some clients see their connection reset ("Read error"). The socket
  // options hook sees the listening socket, so it is listened on again below with uvicorn's
  // backlog (the kernel caps it at net.core.somaxconn).
  int listen_socket = -1;
  server_->set_socket_options([&listen_socket](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_socket = sock;
  });
  if (config_.port == 0) {
    port_ = server_->bind_to_any_port(config_.host);
    if (port_ <= 0) return UnavailableError(fmt::format("cannot bind to {}", config_.host));
  } else {
    if (!server_->bind_to_port(config_.host, config_.port))
      return UnavailableError(
          fmt::format("cannot bind to {}:{} (in use, or not an address of "
                      "this host?)",
                      config_.host, config_.port));
    port_ = config_.port;
  }
  server_->set_socket_options(httplib::default_socket_options);  // the hook held a local
  if (listen_socket >= 0 && ::listen(listen_socket, kListenBacklog) != 0)
    spdlog::warn("could not raise the listen backlog to {}: {}", kListenBacklog,
                 std::strerror(errno));
  if (gated_ != nullptr) gated_->StartGate(limits);
  listen_thread_ = std::thread([this] {
    server_->listen_after_bind();
    listener_done_.store(true);
  });
  return Status::Ok();
}

void ApiServer::SetReady(ServingContext* ctx) {
  ctx_.store(ctx, std::memory_order_release);
}

void ApiServer::BeginShutdown() {
  stopping_.store(true);
  if (ServingContext* ctx = ready()) ctx->set_stopping();
}

void ApiServer::Stop() {
  if (!listen_thread_.joinable()) return;
  BeginShutdown();
  // httplib's stop() does nothing until the listener thread has marked itself running, so a
  // Stop() soon after Start() (a configuration error found once the port is bound) could leave
  // the thread in accept() and the join below waiting forever. Repeat it until the thread ends.
  while (!listener_done_.load()) {
    server_->stop();
    if (!listener_done_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  listen_thread_.join();
  // No handler runs any more; forget the context, which may be destroyed before this server.
  ctx_.store(nullptr);
}

bool ApiServer::Authorized(const httplib::Request& req) const {
  if (config_.api_keys.empty()) return true;
  const std::string header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (header.compare(0, prefix.size(), prefix) != 0) return false;
  const std::string given = header.substr(prefix.size());
  // Every key is compared, so the time taken does not say which one nearly matched.
  bool ok = false;
  for (const std::string& key : config_.api_keys) ok = ConstantTimeEquals(given, key) || ok;
  return ok;
}

void ApiServer::InstallMiddleware() {
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // A CORS preflight never reaches a route (Starlette answers it in its middleware).
    if (req.method != "OPTIONS" || !req.has_header("Origin") ||
        !req.has_header("Access-Control-Request-Method"))
      return httplib::Server::HandlerResponse::Unhandled;
    const CorsPolicy::Preflight p = cors_.Answer(
        req.get_header_value("Origin"), req.get_header_value("Access-Control-Request-Method"),
        req.get_header_value("Access-Control-Request-Headers"));
    res.status = p.status;
    for (const auto& [k, v] : p.headers) res.set_header(k, v);
    res.set_content(p.body, "text/plain; charset=utf-8");
    return httplib::Server::HandlerResponse::Handled;
  });
  server_->set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.has_header("Origin") && !res.has_header("Access-Control-Allow-Methods")) {
      for (const auto& [k, v] :
           cors_.SimpleHeaders(req.get_header_value("Origin"), req.has_header("Cookie")))
        res.set_header(k, v);
    }
    if (config_.enable_request_id_headers) {
      const std::string id = req.get_header_value("X-Request-Id");
      res.set_header("X-Request-Id", id.empty() ? RandomHex32() : id);
    }
  });
  server_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    const bool excluded = std::find(config_.access_log_excluded_paths.begin(),
                                    config_.access_log_excluded_paths.end(),
                                    req.path) != config_.access_log_excluded_paths.end();
    if (!config_.access_log || excluded) return;
    // uvicorn's access line: client - "METHOD path HTTP/x" status phrase.
    spdlog::info("{}:{} - \"{} {} {}\" {} {}", req.remote_addr, req.remote_port, req.method,
                 req.target.empty() ? req.path : req.target, req.version, res.status,
                 ReasonPhrase(res.status));
  });
}

void ApiServer::Route(const char* method, const std::string& path, Access access, Handler handler) {
  auto wrapped = [this, access, handler](const httplib::Request& req, httplib::Response& res) {
    const Clock::time_point arrival = Clock::now();
    if (access == Access::kApiKey && !Authorized(req))
      return SendError(res, ApiError::Unauthorized());
    if (stopping_.load())
      return SendError(res, ApiError::Unavailable("The server is shutting down."));
    ServingContext* ctx = ready();
    if (ctx == nullptr)
      return SendError(res, ApiError::Unavailable("The model is still loading; retry shortly."));
    try {
      handler(*ctx, req, res, arrival);
      // A large body (and the tokens and JSON made from it) leaves freed pages in the arena
      // of this thread; hand them back so RSS returns to its level before the request.
      if (req.body.size() >= kTrimAfterBodyBytes) ReleaseFreeHeapMemory();
    } catch (const std::exception& e) {
      // A handler bug must cost one request, not the server.
      spdlog::error("{} {}: {}", req.method, req.path, e.what());
      SendError(res, ApiError::Internal(e.what()));
    }
  };
  auto not_allowed = [](const httplib::Request&, httplib::Response& res) {
    SendError(res, ApiError::MethodNotAllowed());
  };
  // "GET", "POST", or "GET|POST" for a route that answers both; the other method gets 405.
  // Behind a path-routing proxy (--root-path) the prefixed path answers too.
  std::vector<std::string> paths = {path};
  if (!config_.root_path.empty()) paths.push_back(config_.root_path + path);
  const std::string_view m(method);
  for (const std::string& p : paths) {
    if (m == "GET|POST") {
      server_->Get(p, wrapped);
      server_->Post(p, wrapped);
    } else if (m == "GET") {
      server_->Get(p, wrapped);
      server_->Post(p, not_allowed);
    } else {
      server_->Post(p, wrapped);
      server_->Get(p, not_allowed);
    }
  }
}

void ApiServer::RegisterRoutes() {
  auto adapt = [](void (*fn)(ServingContext&, const httplib::Request&, httplib::Response&)) {
    return [fn](ServingContext& c, const httplib::Request& q, httplib::Response& r,
                Clock::time_point) { fn(c, q, r); };
  };
  Route("POST", "/v1/completions", Access::kApiKey, HandleCompletions);
  Route("POST", "/v1/chat/completions", Access::kApiKey, HandleChatCompletions);
  Route("GET", "/v1/models", Access::kApiKey, adapt(HandleModels));
  Route("GET", R"(/v1/models/([^/]+))", Access::kApiKey,
        [](ServingContext& ctx, const httplib::Request& req, httplib::Response& res,
           Clock::time_point) {
          const std::string name = req.matches[1];
          for (const std::string& served : ctx.config().served_model_names) {
            if (served != name) continue;
            return SendJson(res, 200,
                            {{"id", name},
                             {"object", "model"},
                             {"created", static_cast<int64_t>(std::time(nullptr))},
                             {"owned_by", "pagellm"},
                             {"root", ctx.config().model_path},
                             {"parent", nullptr},
                             {"max_model_len", ctx.max_model_len()}});
          }
          ApiError e = ApiError::NotFound(fmt::format("The model `{}` does not exist.", name));
          e.param = "model";
          SendError(res, e);
        });
  Route("POST", "/tokenize", Access::kOpen, adapt(HandleTokenize));
  Route("POST", "/detokenize", Access::kOpen, adapt(HandleDetokenize));
  Route(
      "POST", "/reset_prefix_cache", Access::kApiKey,
      [](ServingContext& ctx, const httplib::Request&, httplib::Response& res, Clock::time_point) {
        const bool reset = ctx.engine().ResetPrefixCache();
        SendJson(res, 200, {{"reset", reset}});
      });
  // Probes: /health and /ping are 200 once the model serves (503 while loading or stopping,
  // from the wrapper); /version answers at any time.
  // /ping (GET and POST) is vLLM's SageMaker-style alias of /health.
  const auto healthy = [](ServingContext&, const httplib::Request&, httplib::Response& res,
                          Clock::time_point) { res.status = 200; };
  Route("GET", "/health", Access::kOpen, healthy);
  Route("GET|POST", "/ping", Access::kOpen, healthy);
  for (const std::string& prefix : {std::string(), config_.root_path}) {
    server_->Get(prefix + "/version", [](const httplib::Request&, httplib::Response& res) {
      SendJson(res, 200, {{"version", PAGELLM_VERSION}});
    });
    if (!config_.disable_openapi) {
      server_->Get(prefix + "/openapi.json",
                   [this](const httplib::Request&, httplib::Response& res) {
                     SendJson(res, 200, OpenApiSpec(config_.root_path));
                   });
    }
    if (config_.root_path.empty()) break;
  }
  // vLLM's server load: API requests in flight (generation and embeddings).
  Route(
      "GET", "/load", Access::kOpen,
      [](ServingContext& ctx, const httplib::Request&, httplib::Response& res, Clock::time_point) {
        SendJson(res, 200, {{"server_load", ctx.server_load()}});
      });
  // SageMaker's single inference route: the body's shape picks the API (vLLM's order: chat
  // messages, then a completion prompt, then embedding input).
  Route("POST", "/invocations", Access::kApiKey,
        [](ServingContext& ctx, const httplib::Request& req, httplib::Response& res,
           Clock::time_point arrival) {
          auto body = ParseJsonObject(req.body);
          if (!body.ok()) return SendError(res, ApiError::BadRequest(body.status().message()));
          if (body->contains("messages")) return HandleChatCompletions(ctx, req, res, arrival);
          if (body->contains("prompt")) return HandleCompletions(ctx, req, res, arrival);
          if (body->contains("input")) return HandleEmbeddings(ctx, req, res, arrival);
          SendError(res, ApiError::BadRequest(
                             "Cannot find suitable handler for request. Expected one of: chat "
                             "completions (messages), completions (prompt), embeddings (input)"));
        });
  Route("POST", "/v1/embeddings", Access::kApiKey, HandleEmbeddings);
  Route(
      "GET", "/metrics", Access::kOpen,
      [](ServingContext& ctx, const httplib::Request&, httplib::Response& res, Clock::time_point) {
        res.status = 200;
        res.set_content(ctx.metrics().Render(ctx.engine().stats()),
                        "text/plain; version=0.0.4; charset=utf-8");
      });
}

}  // namespace pagellm
