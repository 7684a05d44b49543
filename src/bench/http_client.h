// A small blocking HTTP client for the benchmarks (cpp-httplib underneath): JSON POSTs and
// streamed POSTs whose body is handed over piece by piece as it arrives, so that token arrival
// times can be taken. Not thread-safe: use one client per thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "bench/protocol.h"
#include "pagellm/status.h"

namespace httplib {
class Client;
}

namespace pagellm::bench {

struct HttpResponse {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  // timeout_s: the longest wait for any single read (a whole generation can take longer).
  HttpClient(const HttpTarget& target, double timeout_s, const std::string& api_key);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Connection failures and timeouts are errors; any HTTP status is a response.
  StatusOr<HttpResponse> Get(const std::string& path);
  StatusOr<HttpResponse> PostJson(const std::string& path, const std::string& body);
  // On a 2xx status, `on_bytes` receives the body as it arrives (return false to stop reading);
  // otherwise the body is collected into the response. The response's body is empty on 2xx.
  StatusOr<HttpResponse> PostStream(const std::string& path, const std::string& body,
                                    const std::function<bool(std::string_view)>& on_bytes);

 private:
  std::string origin_;
  std::string prefix_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace pagellm::bench
