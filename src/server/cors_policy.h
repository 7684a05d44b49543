// CorsPolicy: cross-origin resource sharing for browser clients, with the semantics of
// Starlette's CORSMiddleware, which vLLM's server installs from --allowed-origins,
// --allowed-methods, --allowed-headers and --allow-credentials:
//  * a preflight (OPTIONS with Access-Control-Request-Method) is answered here: 200 "OK" with
//    the allowed methods / headers, or 400 "Disallowed CORS origin, method, headers" naming
//    what failed;
//  * any other request from a browser (an Origin header) gets Access-Control-Allow-Origin when
//    its origin is allowed ("*" when every origin is, unless it carries cookies).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace pagellm {

class CorsPolicy {
 public:
  struct Preflight {
    int status = 200;
    std::string body;  // "OK" or "Disallowed CORS ..."
    std::vector<std::pair<std::string, std::string>> headers;
  };

  // "*" in a list allows every value of it.
  CorsPolicy(std::vector<std::string> origins, std::vector<std::string> methods,
             std::vector<std::string> headers, bool allow_credentials);

  // The answer to a preflight request. `requested_headers` is the raw
  // Access-Control-Request-Headers value ("" when absent).
  Preflight Answer(const std::string& origin, const std::string& requested_method,
                   const std::string& requested_headers) const;
  // Headers to add to an ordinary response to a request with this Origin.
  std::vector<std::pair<std::string, std::string>> SimpleHeaders(const std::string& origin,
                                                                 bool has_cookie) const;

 private:
  bool OriginAllowed(const std::string& origin) const;

  std::vector<std::string> origins_;
  std::vector<std::string> methods_;
  std::vector<std::string> allow_headers_;  // safelisted + allowed, sorted
  bool all_origins_ = false;
  bool all_headers_ = false;
  bool credentials_ = false;
};

}  // namespace pagellm
