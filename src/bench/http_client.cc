#include "bench/http_client.h"

// The TLS/compression defines the header needs to match Debian's compiled library come from
// the cpp-httplib pkg-config module (CMakeLists.txt links PkgConfig::HTTPLIB).
#include <httplib.h>

#include <cmath>

#include "fmt/format.h"

namespace pagellm::bench {

namespace {

Status TransportError(httplib::Error e, const std::string& url) {
  return UnavailableError(fmt::format("{}: {} error", url, httplib::to_string(e)));
}

httplib::Headers JsonHeaders() {
  // Identity encoding: a compressed event stream would arrive in bursts, skewing ITL.
  return {{"Content-Type", "application/json"}, {"Accept-Encoding", "identity"}};
}

}  // namespace

HttpClient::HttpClient(const HttpTarget& target, double timeout_s, const std::string& api_key)
    : origin_(target.origin),
      prefix_(target.path_prefix),
      client_(std::make_unique<httplib::Client>(target.origin)) {
  const double t = std::max(timeout_s, 0.001);
  const time_t sec = static_cast<time_t>(std::floor(t));
  const time_t usec = static_cast<time_t>((t - static_cast<double>(sec)) * 1e6);
  client_->set_connection_timeout(10, 0);
  client_->set_read_timeout(sec, usec);
  client_->set_write_timeout(sec, usec);
  client_->set_tcp_nodelay(true);
  client_->set_decompress(false);
  if (!api_key.empty()) client_->set_bearer_token_auth(api_key);
}

HttpClient::~HttpClient() = default;

StatusOr<HttpResponse> HttpClient::Get(const std::string& path) {
  auto res = client_->Get(prefix_ + path);
  if (!res) return TransportError(res.error(), origin_ + prefix_ + path);
  return HttpResponse{res->status, res->body};
}

StatusOr<HttpResponse> HttpClient::PostJson(const std::string& path, const std::string& body) {
  auto res = client_->Post(prefix_ + path, JsonHeaders(), body, "application/json");
  if (!res) return TransportError(res.error(), origin_ + prefix_ + path);
  return HttpResponse{res->status, res->body};
}

StatusOr<HttpResponse> HttpClient::PostStream(
    const std::string& path, const std::string& body,
    const std::function<bool(std::string_view)>& on_bytes) {
  httplib::Request req;
  req.method = "POST";
  req.path = prefix_ + path;
  req.headers = JsonHeaders();
  req.body = body;
  HttpResponse out;
  req.response_handler = [&](const httplib::Response& r) {
    out.status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (out.status / 100 != 2) {
      out.body.append(data, len);
      return true;
    }
    return on_bytes(std::string_view(data, len));
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool ok = client_->send(req, res, err);
  // Stopping on purpose (on_bytes returned false) is reported as Canceled.
  if (!ok && err != httplib::Error::Canceled) return TransportError(err, origin_ + req.path);
  if (out.status == 0) out.status = res.status;
  return out;
}

}  // namespace pagellm::bench
